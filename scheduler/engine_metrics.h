// The scheduler's metric families (API.md section 9), registered on the
// process registry by this component. Recording is cheap on the hot paths:
// series handles are cached per label set (per tenant and partition for a
// job's end and the scheduler's events), a job's op launches are summed per
// op before they reach shared counters (OpMetrics), and a disabled
// instance (--metrics off) registers nothing and returns from every call at
// its first line.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "scheduler/op_metrics.h"

namespace tensord {

struct JobEvent;

class EngineMetrics {
 public:
  // enabled = false: no family is registered and every call is a no-op (the
  // cost of recording can then be measured against a server that does not).
  explicit EngineMetrics(std::string backend, bool enabled = true);
  ~EngineMetrics();

  bool enabled() const { return enabled_; }

  // A job ended: tensord_jobs_total, the queue and run histograms.
  void job_finished(const std::string& tenant, const std::string& partition, const std::string& state, double queue_s,
                    double run_s);
  // Running time to add to tensord_tenant_busy_seconds_total: the engine
  // adds it while jobs run (every second) and the rest at their end.
  void tenant_busy(const std::string& tenant, const std::string& partition, double seconds);
  // Nodes that ran, summed per op: tensord_op_launches_total{op, backend},
  // tensord_op_seconds{op} (scheduler/op_metrics.h). `backend` is the one
  // each entry names (whose kernel ran), the engine's for entries without
  // one. Clears the batch.
  void ops_ran(OpMetrics::Batch& ops);
  void queue_depth(const std::string& tenant, const std::string& partition, int64_t depth);
  void inflight(const std::string& partition, int64_t n, int64_t limit);
  void tenant_memory(const std::string& tenant, int64_t used, int64_t limit);
  void device_memory(const std::string& device, int64_t used, int64_t total);
  // tensord_graph_replays_total{tenant, state}; captures and live graphs.
  void graph_replayed(const std::string& tenant, const std::string& state);
  void graph_captured(const std::string& tenant, int live_delta);
  void tenant_registered(const std::string& tenant);
  // The scheduler's observer: keeps queue depth per tenant and in-flight
  // jobs per partition. Called under the scheduler's lock: cheap, no calls back.
  void on_event(const JobEvent& e);

 private:
  struct Impl;
  const bool enabled_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensord
