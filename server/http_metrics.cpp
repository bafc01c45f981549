#include "server/http_metrics.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "metrics/metrics.h"

namespace tensord {
namespace {

std::string_view bounded_method(std::string_view m) {
  static constexpr std::array<std::string_view, 9> kKnown = {"GET",   "HEAD",    "POST",    "PUT",  "DELETE",
                                                             "PATCH", "OPTIONS", "CONNECT", "TRACE"};
  for (auto k : kKnown) {
    if (k == m) return k;
  }
  return "other";
}

// A thread's series handles for one HttpMetrics instance (`owner`): keep-alive
// clients repeat a few (route, method, code) triples, found here without the
// instance's lock. Series are never removed, so the pointers stay valid.
struct ThreadCache {
  struct Entry {
    std::string route;
    std::string_view method;  // one of bounded_method's literals
    int status;
    prometheus::Counter* counter;
    prometheus::Histogram* duration;
  };
  uint64_t owner = 0;
  std::vector<Entry> entries;
};
thread_local ThreadCache tls_cache;
constexpr size_t kThreadCacheEntries = 64;  // beyond: the shared map, under its lock

std::atomic<uint64_t> next_instance{1};

}  // namespace

struct HttpMetrics::Impl {
  struct Child {
    std::string method;
    int status;
    prometheus::Counter* counter;
  };
  struct PerRoute {
    prometheus::Histogram* duration = nullptr;
    std::vector<Child> children;  // a handful per route: linear search
  };

  const uint64_t instance = next_instance.fetch_add(1);
  prometheus::Family<prometheus::Counter>* requests = nullptr;
  prometheus::Family<prometheus::Histogram>* duration = nullptr;
  std::mutex mu;
  std::map<std::string, PerRoute, std::less<>> routes;
};

HttpMetrics& HttpMetrics::global() {
  static auto* instance = new HttpMetrics();  // outlives every session
  return *instance;
}

HttpMetrics::HttpMetrics() : impl_(std::make_unique<Impl>()) {
  auto& registry = metrics_registry();
  impl_->requests = &prometheus::BuildCounter()
                         .Name("tensord_http_requests_total")
                         .Help("HTTP requests answered, by route template, method and status code.")
                         .Register(registry);
  impl_->duration = &prometheus::BuildHistogram()
                         .Name("tensord_http_request_duration_seconds")
                         .Help("Time from a request's headers to its response, by route template.")
                         .Register(registry);
}

HttpMetrics::~HttpMetrics() = default;

void HttpMetrics::record(std::string_view route, std::string_view method, int status, double seconds) {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  if (route.empty()) route = kUnmatchedRoute;
  method = bounded_method(method);
  if (status < 100 || status > 999) status = 0;

  // This thread's cache first: no lock, no label hashing.
  ThreadCache& cache = tls_cache;
  if (cache.owner != impl_->instance) {
    cache.entries.clear();
    cache.owner = impl_->instance;
  }
  for (const auto& e : cache.entries) {
    if (e.status == status && e.method == method && e.route == route) {
      e.counter->Increment();
      e.duration->Observe(seconds < 0 ? 0 : seconds);
      return;
    }
  }

  prometheus::Counter* counter = nullptr;
  prometheus::Histogram* histogram = nullptr;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->routes.find(route);
    if (it == impl_->routes.end()) {
      it = impl_->routes.emplace(std::string(route), Impl::PerRoute{}).first;
      it->second.duration = &impl_->duration->Add({{"route", it->first}}, kBuckets);
    }
    histogram = it->second.duration;
    for (const auto& c : it->second.children) {
      if (c.status == status && c.method == method) {
        counter = c.counter;
        break;
      }
    }
    if (counter == nullptr) {
      counter = &impl_->requests->Add(
          {{"route", it->first}, {"method", std::string(method)}, {"code", std::to_string(status)}});
      it->second.children.push_back({std::string(method), status, counter});
    }
  }
  if (cache.entries.size() < kThreadCacheEntries) {
    cache.entries.push_back({std::string(route), method, status, counter, histogram});
  }
  counter->Increment();
  histogram->Observe(seconds < 0 ? 0 : seconds);
}

}  // namespace tensord
