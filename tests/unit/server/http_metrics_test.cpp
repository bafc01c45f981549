#include "server/http_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <string>
#include <thread>
#include <vector>

#include "metrics/metrics.h"

namespace tensord {
namespace {

// requests_total for (route, method, code), or -1. The registry is
// process-wide: each test uses routes no other test records.
double requests(const std::string& route, const std::string& method, const std::string& code) {
  for (const auto& f : metrics_registry().Collect()) {
    if (f.name != "tensord_http_requests_total") continue;
    for (const auto& m : f.metric) {
      int hits = 0;
      for (const auto& l : m.label) {
        hits += (l.name == "route" && l.value == route) + (l.name == "method" && l.value == method) +
                (l.name == "code" && l.value == code);
      }
      if (hits == 3) return m.counter.value;
    }
  }
  return -1;
}

uint64_t duration_count(const std::string& route) {
  for (const auto& f : metrics_registry().Collect()) {
    if (f.name != "tensord_http_request_duration_seconds") continue;
    for (const auto& m : f.metric) {
      if (m.label.size() == 1 && m.label[0].value == route) return m.histogram.sample_count;
    }
  }
  return 0;
}

TEST(HttpMetrics, RepeatedRecordsHitTheSameSeries) {
  HttpMetrics m;
  for (int i = 0; i < 5; ++i) m.record("/hm/a", "GET", 200, 0.001);
  m.record("/hm/a", "GET", 404, 0.001);
  m.record("/hm/a", "POST", 200, 0.001);
  m.record("/hm/a", "BREW", 200, 0.001);  // not a standard method
  EXPECT_EQ(requests("/hm/a", "GET", "200"), 5);
  EXPECT_EQ(requests("/hm/a", "GET", "404"), 1);
  EXPECT_EQ(requests("/hm/a", "POST", "200"), 1);
  EXPECT_EQ(requests("/hm/a", "other", "200"), 1);
  EXPECT_EQ(duration_count("/hm/a"), 8u);
}

TEST(HttpMetrics, CountsFromManyThreads) {
  HttpMetrics m;
  constexpr int kThreads = 4, kPerThread = 2000;
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&m] {
      for (int k = 0; k < kPerThread; ++k) m.record(k % 2 ? "/hm/odd" : "/hm/even", "GET", 200, 0.0002);
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(requests("/hm/odd", "GET", "200"), kThreads * kPerThread / 2);
  EXPECT_EQ(requests("/hm/even", "GET", "200"), kThreads * kPerThread / 2);
  EXPECT_EQ(duration_count("/hm/odd"), static_cast<uint64_t>(kThreads * kPerThread / 2));
}

TEST(HttpMetrics, MoreSeriesThanTheThreadCacheHolds) {
  // Past the per-thread cache's size, records still land (through the
  // shared map); earlier cached entries keep working.
  HttpMetrics m;
  for (int round = 0; round < 2; ++round) {
    for (int r = 0; r < 100; ++r) m.record("/hm/many/" + std::to_string(r), "GET", 200, 0.001);
  }
  for (int r : {0, 63, 64, 99}) EXPECT_EQ(requests("/hm/many/" + std::to_string(r), "GET", "200"), 2) << r;
}

TEST(HttpMetrics, EmptyRouteIsUnmatchedAndBadStatusIsZero) {
  HttpMetrics m;
  m.record("", "DELETE", 1234, 0.001);
  EXPECT_GE(requests("unmatched", "DELETE", "0"), 1);
}

}  // namespace
}  // namespace tensord
