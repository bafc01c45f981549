// A captured graph's executable form on the CPU (API.md 4.3): a flat list of
// instructions over buffers bound once, at capture. Each instruction holds
// its kernel (resolved for the backend: no lookup by name at replay), its
// argument list prebuilt over the static buffers (inputs, constants, and
// node outputs in chunks of the graph's pool, shared by values whose
// lifetimes do not overlap: graphs/buffer_plan.h) and the buffers its
// results go to, which OpContext::empty hands the kernel (OutputSlots).
// Replay copies the request's inputs into the static input buffers (a no-op
// when they already are those buffers) and runs the list: no JSON, no
// validation, no planning, and no backend allocation for the kernels that
// allocate their results through OpContext::empty (every elementwise,
// reduction, shape, creation and linalg op; a kernel's own host scratch,
// such as a cast copy of a scalar operand, stays as it is).
//
// The first run records, for each elementwise node, the kernel's one loop
// over its buffers (ops/recorded_block.h); later runs call that loop
// directly, which skips the kernel's dispatch, broadcast planning and result
// vectors (most of a small node's cost: bench/README.md, graphs). A recording is kept
// only when every operand lies in a static buffer (not a kernel temporary)
// and the result went to the node's slot; anything else stays a kernel call.
//
// Where a result does not land in its buffer (a view such as reshape, `to`
// returning its input, a temporary that took the slot), it is copied there,
// so the memory plan holds whatever a kernel does. Control-flow nodes and
// in-place ops (copy_) keep the general path inside the plan: their kernels
// and bodies allocate as execute_program's do, and their results are copied
// into their buffers. Writes to stored tensors (copy_, optimizers) and the
// program's outputs are copied out of the static buffers, which the next
// replay of any graph sharing the pool overwrites. A cond or while_loop
// whose subprograms write no stored tensor runs them as plans of their own
// (graphs/control_plan.h), so a captured loop's body replays its recorded
// loops too.
//
// On a device other than the CPU, a program the device can capture whole
// replays as a device graph (graphs/device_graph.h: CUDA graphs with IF and
// WHILE nodes) that falls back to the executor where the device refuses
// the capture (graphs/fallback_executable.h); any other runs
// execute_program, its nodes placed as for /v1/run
// (graphs/device_placement.h).
//
// Thread-safety: run() takes the pool's run mutex (graphs sharing a pool
// share its buffers: one replay at a time); everything else is immutable
// after construction (launch_on: before the graph serves).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graphs/compiled_program.h"
#include "graphs/device_graph.h"
#include "graphs/executable.h"
#include "graphs/executor.h"
#include "graphs/graph_pool.h"

namespace tensord {

struct BlockRecorder;
class PendingStore;

class ReplayPlan final : public Executable {
 public:
  // Binds `cp` to `input_buffers` (one per program input, as captured) and
  // to chunks of `pool`. Throws unsupported when `backend` has no kernel
  // for an op, quota_exceeded when the pool cannot grow. `device_graph`
  // false: no device graph of its own (an SPMD graph's member, whose device
  // graph lives on its rank's GPU: GraphMember::device_graph).
  ReplayPlan(std::shared_ptr<const CompiledProgram> cp, const std::map<std::string, Tensor>& input_buffers,
             GraphPool& pool, Backend* backend, Device device, bool device_graph = true);
  ~ReplayPlan();
  ReplayPlan(const ReplayPlan&) = delete;
  ReplayPlan& operator=(const ReplayPlan&) = delete;

  // Runs the instructions once. `inputs` by name: the static input buffers
  // themselves, or tensors of the captured dtype and shape (copied in;
  // another shape or dtype is conflict, a missing input bad_request).
  // Outputs and stored writes are fresh tensors. Holds the pool's run
  // mutex while it runs.
  ExecResult run(const std::map<std::string, Tensor>& inputs, const ExecOptions& opts) override;
  // Runs over the current contents of the input buffers and returns the
  // outputs as views of the static buffers (valid until the next run of
  // any plan in the pool), for a subprogram plan (graphs/control_plan.h),
  // which writes no stored tensor. CPU plans only; inside the run of the
  // plan that holds it (the pool's run mutex held).
  std::vector<Tensor> run_views(const ExecOptions& opts);
  // An SPMD graph's member on a device: replays launch `graph`, captured on
  // the rank's GPU with its collectives (GraphService::capture_on_ranks),
  // instead of the executor. Before the graph serves.
  void launch_on(std::shared_ptr<DeviceGraph> graph);
  // What run() checks first, for a caller that answers before it queues
  // the replay: an unknown or missing input is bad_request, another shape or
  // dtype than captured conflict, a tensor off the host unsupported.
  void check_inputs(const std::map<std::string, Tensor>& inputs) const;

  const CompiledProgram& program() const override { return *cp_; }
  const std::shared_ptr<const CompiledProgram>& shared_program() const { return cp_; }
  size_t instructions() const;
  // Instructions on the general path (control flow, in-place ops).
  size_t general_instructions() const;
  // Instructions that run as a recorded loop (after the first run).
  size_t recorded_instructions() const;
  // Pool buffers the plan binds (one chunk each).
  size_t buffers() const;
  // Bytes its control-flow nodes' own plans hold (carries, pools).
  int64_t extra_bytes() const;
  // Control-flow nodes that run their subprograms as plans of their own.
  size_t control_plans() const;
  // The device graph a device replays (null on the CPU, or when the program
  // is not capturable there).
  const DeviceGraph* device_graph() const { return device_graph_.get(); }
  // Results that did not land in their buffer and were copied there, over
  // every run so far (0 for a plan whose kernels all write in place).
  int64_t slot_copies() const { return slot_copies_.load(std::memory_order_relaxed); }

 private:
  struct Instruction;
  void bind(GraphPool& pool, Backend* backend);
  void load_inputs(const std::map<std::string, Tensor>& inputs);
  void run_code(const ExecOptions& opts, PendingStore& pending);
  bool is_static(const Tensor& t) const;
  bool in_static_range(const void* p, size_t bytes) const;
  bool keep_recording(const BlockRecorder& rec, const Tensor& out, const Tensor& slot) const;
  Tensor copy_out(const Tensor& t) const;

  std::shared_ptr<const CompiledProgram> cp_;
  // On the CPU: run() runs the instruction list (code_); elsewhere
  // device_run_.
  bool runs_code_ = false;
  std::vector<Instruction> code_;
  std::vector<Tensor> values_;  // per value id: its static tensor (input buffer, constant, pool view)
  std::vector<std::pair<std::string, Tensor>> inputs_;              // name -> static input buffer
  std::vector<const Storage*> static_storage_;                      // sorted: input buffers and pool chunks
  std::vector<std::pair<const char*, const char*>> static_ranges_;  // sorted: bytes of every static value
  size_t n_buffers_ = 0;
  std::atomic<int64_t> slot_copies_{0};
  GraphPool* pool_;  // outlives the plan (its graph holds both)
  std::shared_ptr<DeviceGraph> device_graph_;
  // Off the CPU: what run() runs (the device graph falling back to the
  // executor, or the executor).
  std::shared_ptr<Executable> device_run_;
};

}  // namespace tensord
