// tensord_op_launches_total{op, backend} and tensord_op_seconds{op}
// (API.md 9), kept in relaxed integer atomics instead of prometheus-cpp's
// compare-and-swap doubles. A job's nodes are first summed per op in an
// OpMetrics::Batch (plain arithmetic, no atomics), then committed with one
// atomic add per touched counter and bucket. Before, every node paid three
// CAS loops on shared doubles: ~12 us of a 200-node replay's ~70 us.
// The families are read at scrape time (metrics/metrics.h register_collector).
//
// Thread-safety: a Batch belongs to one thread; commit() and collect() may
// run concurrently from any threads.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace prometheus {
struct MetricFamily;
}

namespace tensord {

class OpMetrics {
 public:
  // Upper bounds (seconds) of the op_seconds buckets; +Inf follows.
  static constexpr std::array<double, 22> kBounds = {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                     0.005,   0.01,     0.025,   0.05,   0.1,     0.25,   0.5,   1,
                                                     2.5,     5,        10,      30,     60,      300};
  static constexpr size_t kBuckets = kBounds.size() + 1;

  // Per (op, backend): launches, bucket counts (not cumulative), total
  // nanoseconds.
  class Batch {
   public:
    // `op` must outlive the batch (an OpDef's name); so must `backend`'s
    // characters (a Backend::name(), a literal), the backend whose kernel
    // ran. An empty `backend`: the one commit() is given.
    void add(const std::string& op, double seconds, std::string_view backend = {});
    bool empty() const { return entries_.empty(); }
    size_t ops() const { return entries_.size(); }

   private:
    friend class OpMetrics;
    struct Entry {
      const std::string* op;
      std::string_view backend;
      uint64_t count = 0;
      uint64_t sum_ns = 0;
      std::array<uint32_t, kBuckets> buckets{};
    };
    std::vector<Entry> entries_;
  };

  // The process-wide instance, registered with render_metrics on first use.
  static OpMetrics& global();

  // Adds the batch's counts under each entry's backend (`fallback` for
  // those added without one) and clears it.
  void commit(std::string_view fallback, Batch& b);
  std::vector<prometheus::MetricFamily> collect() const;

  static size_t bucket_of(double seconds);

 private:
  struct Series;
  Series& series(const std::string& op, std::string_view backend);

  mutable std::mutex mu_;
  // "op\nbackend" -> counters; never removed, so references stay valid.
  std::map<std::string, std::unique_ptr<Series>, std::less<>> series_;
};

}  // namespace tensord
