// A captured graph's executable form on a device (API.md 4.3, CUDA): the
// whole program stream-captured once into a device graph over static device
// buffers, then launched per replay. torch.cond becomes an IF conditional
// node and while_loop a WHILE node, their predicates set on the device from
// the bool values the program computes (Backend::begin_conditional), so a
// replay takes the branch and the trip count the data says with no host
// round trip.
//
// Capturable programs: every node is an op whose backend kernel accepts its
// call and is capture-safe (OpDef::accepts, OpDef::capture_safe), with one
// result, no in-place or stored write; or a cond / while_loop (max_iters >=
// 1) whose subprograms are capturable in turn, at any depth. Anything else
// (scan, map, associative_scan, a CPU fallback, an optimizer) replays through
// execute_program instead (ReplayPlan decides).
//
// Buffers: one device buffer per value of every (sub)program instance, a
// constant uploaded once (wrapped numbers stay launch arguments); a
// subprogram's inputs are its operands' buffers. A while_loop keeps its
// carries in its result buffers: the body's results are staged and copied
// back, then the condition subprogram (captured a second time inside the
// body) sets the next trip; a loop state counts trips, and one stopped at
// max_iters fails the replay with deadline_exceeded, as the CPU does.
//
// A replay copies the inputs in, launches the graph on the job's stream,
// waits for it and copies the outputs out. The first replay captures (the
// capture itself runs nothing) and then launches. Cancellation and the
// deadline are checked before the launch: a launched graph runs to its end.
//
// Thread-safety: run() under the graph pool's run mutex, as ReplayPlan.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graphs/compiled_program.h"
#include "graphs/executor.h"
#include "streams/stream_graph.h"

namespace tensord {

class DeviceGraph {
 public:
  // Whether every node of `cp` (and of its subprograms) can be captured on
  // backend `backend` (see above).
  static bool capturable(const CompiledProgram& cp, std::string_view backend);

  // Allocates every buffer on `backend`/`device`, charged to `account`
  // (quota_exceeded: nothing kept). `cp` must be capturable.
  DeviceGraph(std::shared_ptr<const CompiledProgram> cp, Backend* backend, Device device,
              std::shared_ptr<MemoryAccount> account);
  ~DeviceGraph();
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;

  // One replay on opts.ctx.stream; `inputs` by name, host tensors of the
  // captured metas (the caller checked them: ReplayPlan::check_inputs).
  // Outputs are fresh host tensors.
  ExecResult run(const std::map<std::string, Tensor>& inputs, const ExecOptions& opts);

  bool captured() const { return graph_ != nullptr; }
  // Device graph nodes (0 before the first replay).
  size_t nodes() const { return graph_ ? graph_->nodes() : 0; }
  // Bytes of device buffers the graph holds.
  int64_t bytes() const { return bytes_; }

 private:
  struct Frame;
  std::unique_ptr<Frame> make_frame(const CompiledProgram& cp, const std::vector<Tensor>& inputs);
  Tensor buffer(const TensorMeta& m);
  void capture(const Frame& f, const OpContext& ctx);
  void capture_cond(const Frame& f, size_t node, const OpContext& ctx);
  void capture_while(const Frame& f, size_t node, const OpContext& ctx);
  void copy(const OpContext& ctx, const Tensor& dst, const Tensor& src);

  std::shared_ptr<const CompiledProgram> cp_;
  Backend* backend_;
  Device device_;
  std::shared_ptr<MemoryAccount> account_;
  std::unique_ptr<Frame> root_;
  std::shared_ptr<StreamGraph> graph_;
  int64_t bytes_ = 0;
  // Every while_loop node and its loop state buffer, for the overflow check.
  std::vector<std::pair<const BoundNode*, Tensor>> loops_;
};

}  // namespace tensord
