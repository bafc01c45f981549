// Captured graphs (API.md 4.3): a program validated, shape-inferred and
// planned once, with static input buffers, its intermediates and outputs in
// a memory pool charged to the tenant, and its replay plan (a flat
// instruction list over those buffers: graphs/replay_plan.h), replayed many
// times. Per tenant; another tenant's graph is
// invisible (not found). No JSON here.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "graphs/compiled_program.h"
#include "graphs/graph_pool.h"
#include "graphs/replay_plan.h"
#include "ops/backend.h"
#include "ops/memory_account.h"

namespace tensord {

struct CapturedGraph {
  std::string id;
  std::string name;  // optional, unique per tenant (the KServe model name, API.md 11)
  std::string tenant;
  std::shared_ptr<const CompiledProgram> program;
  std::map<std::string, Tensor> buffers;  // static input buffers, by input name
  std::shared_ptr<GraphPool> pool;
  std::shared_ptr<ReplayPlan> plan;  // over `buffers` and chunks of `pool`
  std::string pool_id;               // the graph whose capture created the pool
  std::atomic<int64_t> replays{0};
  int64_t buffer_bytes = 0;

  // Static input buffers plus the pool's chunks (shared with the graphs of
  // the same pool), plus what the plan holds of its own: its control-flow
  // nodes' subprogram plans, or a device graph's buffers.
  int64_t bytes() const {
    if (!plan) return buffer_bytes + pool->reserved();
    return buffer_bytes + pool->reserved() + plan->extra_bytes() +
           (plan->device_graph() ? plan->device_graph()->bytes() : 0);
  }
  int64_t nodes() const { return static_cast<int64_t>(program->nodes.size()); }
};

class GraphStore {
 public:
  // Takes a compiled program, allocates its static input buffers on
  // `backend` (charged to `account`), binds its intermediates and outputs to
  // a pool (a new one, or the pool of the tenant's graph `pool_of`; not
  // found if there is none) and builds its replay plan. A non-empty `name`
  // another of the tenant's graphs holds is conflict (checked again when
  // the graph is stored, so two captures racing for a name get one each).
  std::shared_ptr<CapturedGraph> capture(const std::string& tenant, const std::shared_ptr<MemoryAccount>& account,
                                         Backend* backend, Device device, CompiledProgram cp,
                                         const std::string& pool_of = {}, const std::string& name = {});
  // Throws conflict when one of the tenant's graphs holds `name` (a check
  // before the costly capture).
  void check_name_free(const std::string& tenant, const std::string& name) const;
  // Null when absent or another tenant's.
  std::shared_ptr<CapturedGraph> find(const std::string& tenant, const std::string& id) const;
  // By name, else by id; null when neither is the tenant's.
  std::shared_ptr<CapturedGraph> find_by_name_or_id(const std::string& tenant, const std::string& model) const;
  // False when absent. Frees its name. Memory is released once no replay
  // holds the graph.
  bool erase(const std::string& tenant, const std::string& id);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<CapturedGraph>> graphs_;
  std::map<std::pair<std::string, std::string>, std::string> names_;  // (tenant, name) -> id
  std::atomic<int64_t> next_{1};
};

// Graphviz text of a compiled program (control-flow bodies as clusters).
std::string graph_to_dot(const CompiledProgram& cp, const std::string& name);

}  // namespace tensord
