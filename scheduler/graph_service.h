// GraphService: captured graphs beside the engine (API.md 4.3, 8, 11). It
// owns the graph store; a capture (validate, infer, plan, allocate, bind)
// runs as a job on the tenant's partition (Engine::run_task_async: queued,
// cancellable while queued, counted and traced like any job, with the
// partition's device and stream), replays go through the engine's replay
// paths, and the graph metrics and the tenant's memory gauge follow every
// capture and delete. The routes (server/routes_graphs.cpp, KServe's) parse,
// call it and encode. No JSON here. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graphs/graph_store.h"
#include "scheduler/job_spec.h"
#include "scheduler/model_metrics.h"

namespace tensord {

class Engine;
class Job;
struct ExecOptions;
struct Tenant;

class GraphService {
 public:
  explicit GraphService(Engine& engine) : engine_(engine) {}
  GraphService(const GraphService&) = delete;
  GraphService& operator=(const GraphService&) = delete;

  // Queues the capture of `cr` as a job of `tenant`; `done(job, graph)`
  // once it has ended (graph null unless the job succeeded). A name another
  // of the tenant's graphs holds is conflict, thrown before anything is
  // queued; so are a full queue and a draining server (as run_async).
  using CaptureDone = std::function<void(Job&, const std::shared_ptr<CapturedGraph>&)>;
  std::shared_ptr<Job> capture_async(Tenant& tenant, GraphCaptureRequest cr, const std::string& request_id,
                                     CaptureDone done);
  // Queues a replay of `g` with `spec`: refuses a stored graph input
  // (bad_request) and inputs of another shape or dtype than captured
  // (conflict) before anything is queued; counts the replay in the graph
  // when it succeeds, then calls `done`. A graph captured with ranks
  // replays SPMD; one captured without refuses SPMD inputs (bad_request).
  std::shared_ptr<Job> replay_async(Tenant& tenant, const std::shared_ptr<CapturedGraph>& g, JobSpec spec,
                                    std::function<void(Job&)> done);

  // The tenant's captured graph `id`: not_found when it has none by that
  // id, conflict while it is still capturing.
  std::shared_ptr<CapturedGraph> find(const Tenant& tenant, const std::string& id) const;
  // By model name, else by id; null when neither is the tenant's.
  std::shared_ptr<CapturedGraph> find_model(const Tenant& tenant, const std::string& model) const;
  // GET /v1/graphs/{id}: a graph or a capture in progress; not_found otherwise.
  GraphInfo info(const Tenant& tenant, const std::string& id) const;
  // DELETE /v1/graphs/{id}: frees it (its pool once no graph shares it);
  // conflict while capturing, not_found when absent.
  void erase(Tenant& tenant, const std::string& id);

  GraphStore& store() { return store_; }
  // The tenant's captured graphs (the KServe repository index and statistics).
  std::vector<std::shared_ptr<CapturedGraph>> list(const Tenant& tenant) const;

 private:
  std::shared_ptr<CapturedGraph> capture(Tenant& tenant, const GraphCaptureRequest& cr, Device device);
  std::shared_ptr<CapturedGraph> capture_spmd(Tenant& tenant, const GraphCaptureRequest& cr, const ExecOptions& opts);
  // An SPMD graph's members' device graphs, captured on their ranks.
  void capture_on_ranks(Tenant& tenant, SpmdGraph& sg, const ExecOptions& opts);

  Engine& engine_;
  GraphStore store_;
  ModelMetrics model_metrics_{store_};  // after store_: leaves the collector before the store goes
};

}  // namespace tensord
