// The scheduler's metric families (API.md section 9), registered on the
// process registry by this component. Children are cached per label set so
// recording on the hot path is a map lookup under a short lock at most.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace tensord {

struct JobEvent;

class EngineMetrics {
 public:
  explicit EngineMetrics(std::string backend);
  ~EngineMetrics();

  void job_finished(const std::string& tenant, const std::string& partition, const std::string& state, double queue_s,
                    double run_s);
  void op_ran(const std::string& op, double seconds);
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
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensord
