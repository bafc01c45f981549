// Captured graphs (API.md 4.3): a program validated, shape-inferred and
// planned once, with static input buffers, its intermediates and outputs in
// a memory pool charged to the tenant, and its replay plan (a flat
// instruction list over those buffers: graphs/replay_plan.h), replayed many
// times. Per tenant; another tenant's graph is
// invisible (not found). No JSON here.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graphs/compiled_program.h"
#include "graphs/graph_pool.h"
#include "graphs/model_stats.h"
#include "graphs/replay_plan.h"
#include "ops/backend.h"
#include "ops/memory_account.h"

namespace tensord {

// One rank's part of a graph captured with "ranks" (API.md 8): its program
// (compiled over that rank's input shapes), static input buffers, pool and
// replay plan; on a device, its device graph when the capture made one.
struct GraphMember {
  std::shared_ptr<const CompiledProgram> program;
  std::map<std::string, Tensor> buffers;
  std::shared_ptr<GraphPool> pool;
  std::shared_ptr<ReplayPlan> plan;
  int64_t buffer_bytes = 0;
  // The program captured whole, its collectives included, on the rank's GPU
  // and stream (GraphService::capture_spmd); its plan launches it
  // (ReplayPlan::launch_on). Null: the member replays through `plan` (the
  // executor's path on a device).
  std::shared_ptr<DeviceGraph> device_graph;

  int64_t bytes() const {
    return buffer_bytes + pool->reserved() + plan->extra_bytes() +
           (plan->device_graph() ? plan->device_graph()->bytes() : 0) + (device_graph ? device_graph->bytes() : 0);
  }
};

// A graph captured with "ranks": its group (global ranks, in its order;
// every one this server's) and a member per rank of it. A replay runs every
// member's plan on its rank, one SPMD job at a time (scheduler/rank_workers.h).
struct SpmdGraph {
  std::vector<int> ranks;
  std::string group;  // "world", "ranks:1,3"
  std::vector<GraphMember> members;
};

struct CapturedGraph {
  std::string id;
  std::string name;  // optional, unique per tenant (the KServe model name, API.md 11)
  std::string tenant;
  // An SPMD graph's are its first member's (each member has its own pool:
  // the ranks run at once).
  std::shared_ptr<const CompiledProgram> program;
  std::map<std::string, Tensor> buffers;  // static input buffers, by input name
  std::shared_ptr<GraphPool> pool;
  std::shared_ptr<ReplayPlan> plan;  // over `buffers` and chunks of `pool`
  std::string pool_id;               // the graph whose capture created the pool
  std::atomic<int64_t> replays{0};
  ModelStats stats;  // as a KServe model (API.md 11.1)
  int64_t buffer_bytes = 0;
  std::shared_ptr<const SpmdGraph> spmd;  // null: captured without "ranks"

  // Static input buffers plus the pool's chunks (shared with the graphs of
  // the same pool), plus what the plan holds of its own: its control-flow
  // nodes' subprogram plans, or a device graph's buffers. An SPMD graph's:
  // the sum over its members.
  int64_t bytes() const {
    if (spmd) {
      int64_t b = 0;
      for (const GraphMember& m : spmd->members) b += m.bytes();
      return b;
    }
    if (!plan) return buffer_bytes + pool->reserved();
    return buffer_bytes + pool->reserved() + plan->extra_bytes() +
           (plan->device_graph() ? plan->device_graph()->bytes() : 0);
  }
  int64_t nodes() const { return static_cast<int64_t>(program->nodes.size()); }
};

// What GET /v1/graphs/{id} reports of a graph, captured or capturing.
struct GraphInfo {
  std::string id;
  std::string name;
  int64_t nodes = 0;  // 0 while the capture still validates the program
  int64_t bytes = 0;  // 0 while capturing
  int64_t replays = 0;
  bool is_capturing = false;
  std::string pool;
  std::vector<int> ranks;  // an SPMD graph's group; empty otherwise
  std::string group;
};

class GraphStore {
 public:
  using CompileFn = std::function<CompiledProgram()>;
  // An SPMD graph's members' programs, in its group's order.
  using CompileMembersFn = std::function<std::vector<std::shared_ptr<const CompiledProgram>>()>;
  // Runs a member's binding (which infers its nodes' results again) in the
  // context its program was compiled in (the dist.* ops' group).
  using BindScope = std::function<void(const std::function<void()>& bind)>;
  // Finishes an SPMD graph's members once bound, before the graph is
  // stored (their device graphs, captured on their ranks); what it throws
  // fails the capture.
  using FinishMembers = std::function<void(SpmdGraph&)>;

  // Reserves the graph's id (and its non-empty `name`) and runs `compile`
  // (validation, binding, shape inference, the memory plan); then allocates
  // the static input buffers on `backend` (charged to `account`), binds the
  // intermediates and outputs to a pool (a new one, or the pool of the
  // tenant's graph `pool_of`; not found if there is none) and builds the
  // replay plan. Until it returns, info() reports the id as capturing (the
  // id is reserved first so that a client can watch a long capture);
  // whatever throws frees the id and the name. A `name` another of the
  // tenant's graphs or captures holds is conflict.
  std::shared_ptr<CapturedGraph> capture(const std::string& tenant, const std::shared_ptr<MemoryAccount>& account,
                                         Backend* backend, Device device, const CompileFn& compile,
                                         const std::string& pool_of = {}, const std::string& name = {});
  // The same over a program compiled already.
  std::shared_ptr<CapturedGraph> capture(const std::string& tenant, const std::shared_ptr<MemoryAccount>& account,
                                         Backend* backend, Device device, CompiledProgram cp,
                                         const std::string& pool_of = {}, const std::string& name = {});
  // A graph captured with "ranks" (API.md 8): `compile` gives a program per
  // member of the group `ranks` (named `group`), each bound to static input
  // buffers and a pool of its own. No `pool_of`: its members' pools are
  // private to it. Each member is bound inside `scope`, without a device
  // graph of its plan's own; then `finish` runs over them.
  std::shared_ptr<CapturedGraph> capture_spmd(const std::string& tenant, const std::shared_ptr<MemoryAccount>& account,
                                              Backend* backend, Device device, const CompileMembersFn& compile,
                                              const BindScope& scope, const std::vector<int>& ranks,
                                              const std::string& group, const std::string& name = {},
                                              const FinishMembers& finish = {});
  // Throws conflict when one of the tenant's graphs holds `name` (a check
  // before the costly capture).
  void check_name_free(const std::string& tenant, const std::string& name) const;
  // Null when absent, another tenant's, or still capturing.
  std::shared_ptr<CapturedGraph> find(const std::string& tenant, const std::string& id) const;
  // By name, else by id; null when neither is the tenant's.
  std::shared_ptr<CapturedGraph> find_by_name_or_id(const std::string& tenant, const std::string& model) const;
  // The tenant's graph or capture in progress; nullopt when neither.
  std::optional<GraphInfo> info(const std::string& tenant, const std::string& id) const;
  // Whether `id` is one of the tenant's captures in progress.
  bool capturing(const std::string& tenant, const std::string& id) const;
  // False when absent (a capture in progress included). Frees its name. Memory is released once no replay
  // holds the graph.
  bool erase(const std::string& tenant, const std::string& id);
  size_t size() const;
  // The tenant's captured graphs (captures in progress left out), by id.
  std::vector<std::shared_ptr<CapturedGraph>> list(const std::string& tenant) const;
  // Every tenant's (the tensord_model_* families).
  std::vector<std::shared_ptr<CapturedGraph>> list_all() const;

 private:
  // Both captures: one member (`ranks` empty) or one per rank.
  std::shared_ptr<CapturedGraph> capture_members(const std::string& tenant,
                                                 const std::shared_ptr<MemoryAccount>& account, Backend* backend,
                                                 Device device, const CompileMembersFn& compile, const BindScope& scope,
                                                 const std::string& pool_of, const std::string& name,
                                                 const std::vector<int>& ranks, const std::string& group,
                                                 const FinishMembers& finish);

  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<CapturedGraph>> graphs_;
  std::map<std::pair<std::string, std::string>, std::string> names_;    // (tenant, name) -> id
  std::map<std::pair<std::string, std::string>, GraphInfo> capturing_;  // (tenant, id) -> its info so far
  std::atomic<int64_t> next_{1};
};

// GET /v1/graphs/{id}'s values of a captured graph.
GraphInfo graph_info(const CapturedGraph& g);

// Graphviz text of a compiled program (control-flow bodies as clusters).
std::string graph_to_dot(const CompiledProgram& cp, const std::string& name);

}  // namespace tensord
