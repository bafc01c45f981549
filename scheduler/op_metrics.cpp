#include "scheduler/op_metrics.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include <prometheus/metric_family.h>

#include "metrics/metrics.h"

namespace tensord {

struct OpMetrics::Series {
  std::string op;
  std::string backend;
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> sum_ns{0};
  std::array<std::atomic<uint64_t>, kBuckets> buckets{};
};

size_t OpMetrics::bucket_of(double seconds) {
  // Prometheus buckets are "le": the first bound >= the value. Most ops of
  // a replay take less than the first bound: that is one compare.
  if (seconds <= kBounds[0]) return 0;
  return static_cast<size_t>(std::lower_bound(kBounds.begin(), kBounds.end(), seconds) - kBounds.begin());
}

void OpMetrics::Batch::add(const std::string& op, double seconds, std::string_view backend) {
  Entry* e = nullptr;
  for (Entry& x : entries_) {
    if ((x.op == &op || *x.op == op) && (x.backend.data() == backend.data() || x.backend == backend)) {
      e = &x;
      break;
    }
  }
  if (e == nullptr) {
    entries_.push_back(Entry{&op, backend});
    e = &entries_.back();
  }
  ++e->count;
  const double ns = seconds > 0 ? seconds * 1e9 : 0.0;
  e->sum_ns += static_cast<uint64_t>(std::llround(ns));
  ++e->buckets[bucket_of(seconds)];
}

OpMetrics& OpMetrics::global() {
  static OpMetrics* m = [] {
    auto* p = new OpMetrics();  // leaked, as the registry
    register_collector([p] { return p->collect(); });
    return p;
  }();
  return *m;
}

OpMetrics::Series& OpMetrics::series(const std::string& op, std::string_view backend) {
  std::string key;
  key.reserve(op.size() + 1 + backend.size());
  key.append(op).append(1, '\n').append(backend);
  auto it = series_.find(key);
  if (it == series_.end()) {
    auto s = std::make_unique<Series>();
    s->op = op;
    s->backend = std::string(backend);
    it = series_.emplace(std::move(key), std::move(s)).first;
  }
  return *it->second;
}

void OpMetrics::commit(std::string_view fallback, Batch& b) {
  if (b.entries_.empty()) return;
  std::lock_guard lock(mu_);
  for (const Batch::Entry& e : b.entries_) {
    Series& s = series(*e.op, e.backend.empty() ? fallback : e.backend);
    s.count.fetch_add(e.count, std::memory_order_relaxed);
    s.sum_ns.fetch_add(e.sum_ns, std::memory_order_relaxed);
    for (size_t i = 0; i < kBuckets; ++i) {
      if (e.buckets[i]) s.buckets[i].fetch_add(e.buckets[i], std::memory_order_relaxed);
    }
  }
  b.entries_.clear();
}

std::vector<prometheus::MetricFamily> OpMetrics::collect() const {
  prometheus::MetricFamily launches;
  launches.name = "tensord_op_launches_total";
  launches.help = "Op kernel launches";
  launches.type = prometheus::MetricType::Counter;
  prometheus::MetricFamily secs;
  secs.name = "tensord_op_seconds";
  secs.help = "Op kernel time";
  secs.type = prometheus::MetricType::Histogram;

  struct Hist {
    uint64_t count = 0;
    uint64_t sum_ns = 0;
    std::array<uint64_t, kBuckets> buckets{};
  };
  std::map<std::string, Hist> by_op;  // op_seconds has the op label only
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, s] : series_) {
      prometheus::ClientMetric m;
      m.label = {{"backend", s->backend}, {"op", s->op}};
      m.counter.value = static_cast<double>(s->count.load(std::memory_order_relaxed));
      launches.metric.push_back(std::move(m));
      Hist& h = by_op[s->op];
      h.count += s->count.load(std::memory_order_relaxed);
      h.sum_ns += s->sum_ns.load(std::memory_order_relaxed);
      for (size_t i = 0; i < kBuckets; ++i) h.buckets[i] += s->buckets[i].load(std::memory_order_relaxed);
    }
  }
  for (const auto& [op, h] : by_op) {
    prometheus::ClientMetric m;
    m.label = {{"op", op}};
    uint64_t cum = 0;
    for (size_t i = 0; i < kBuckets; ++i) {
      cum += h.buckets[i];
      prometheus::ClientMetric::Bucket b;
      b.cumulative_count = cum;
      b.upper_bound = i < kBounds.size() ? kBounds[i] : std::numeric_limits<double>::infinity();
      m.histogram.bucket.push_back(b);
    }
    // The count is the +Inf bucket, so a scrape is consistent even while a
    // commit is half done.
    m.histogram.sample_count = cum;
    m.histogram.sample_sum = static_cast<double>(h.sum_ns) * 1e-9;
    secs.metric.push_back(std::move(m));
  }
  std::vector<prometheus::MetricFamily> out;
  out.push_back(std::move(launches));
  out.push_back(std::move(secs));
  return out;
}

}  // namespace tensord
