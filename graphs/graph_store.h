// Captured graphs (API.md 4.3): a program validated, shape-inferred and
// planned once, with static input buffers and a memory pool charged to the
// tenant, replayed many times. Per tenant; another tenant's graph is
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
#include "ops/backend.h"
#include "ops/memory_account.h"

namespace tensord {

// The memory a graph replays in: its planned bytes, charged to the tenant
// once for every graph that shares it (the largest plan among them), and
// released when the last graph using it is deleted. Graphs sharing a pool
// replay one at a time (they share memory).
class GraphPool {
 public:
  explicit GraphPool(std::shared_ptr<MemoryAccount> account) : account_(std::move(account)) {}
  ~GraphPool();
  GraphPool(const GraphPool&) = delete;
  GraphPool& operator=(const GraphPool&) = delete;

  // Grows the reservation to at least `bytes` (charges the difference;
  // throws quota_exceeded, nothing charged).
  void reserve(int64_t bytes);
  int64_t reserved() const;
  std::mutex& run_mutex() { return run_mu_; }

 private:
  std::shared_ptr<MemoryAccount> account_;
  mutable std::mutex mu_;
  int64_t reserved_ = 0;
  std::mutex run_mu_;
};

struct CapturedGraph {
  std::string id;
  std::string tenant;
  std::shared_ptr<const CompiledProgram> program;
  std::map<std::string, Tensor> buffers;  // static input buffers, by input name
  std::shared_ptr<GraphPool> pool;
  std::string pool_id;  // the graph whose capture created the pool
  std::atomic<int64_t> replays{0};
  int64_t buffer_bytes = 0;

  // Static buffers plus the pool's reservation.
  int64_t bytes() const { return buffer_bytes + pool->reserved(); }
  int64_t nodes() const { return static_cast<int64_t>(program->nodes.size()); }
};

class GraphStore {
 public:
  // Takes a compiled program, allocates its static input buffers on
  // `backend` (charged to `account`) and its pool (a new one, or the pool
  // of the tenant's graph `pool_of`; not found if there is none).
  std::shared_ptr<CapturedGraph> capture(const std::string& tenant, const std::shared_ptr<MemoryAccount>& account,
                                         Backend* backend, Device device, CompiledProgram cp,
                                         const std::string& pool_of = {});
  // Null when absent or another tenant's.
  std::shared_ptr<CapturedGraph> find(const std::string& tenant, const std::string& id) const;
  // False when absent. Memory is released once no replay holds the graph.
  bool erase(const std::string& tenant, const std::string& id);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<CapturedGraph>> graphs_;
  std::atomic<int64_t> next_{1};
};

// Copies request inputs into the graph's static buffers (the caller holds
// the pool's run mutex) and returns the buffers as the program's inputs.
// A missing or unknown input is bad_request; another shape or dtype than
// captured is conflict.
std::map<std::string, Tensor> load_replay_inputs(CapturedGraph& g, const std::map<std::string, Tensor>& inputs);

// Graphviz text of a compiled program (control-flow bodies as clusters).
std::string graph_to_dot(const CompiledProgram& cp, const std::string& name);

}  // namespace tensord
