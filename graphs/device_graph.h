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
// execute_program instead (ReplayPlan decides; a capture the device refuses
// falls back to it too).
//
// Collectives (API.md 8): an SPMD graph's member on a device captures its
// dist.* collectives too, on its rank's GPU and stream (GraphService), where
// `collectives` says so and they sit at the program's top level (inside a
// cond or while_loop body they would take a data-dependent number of seqs:
// such a program is not capturable). Before the stream capture begins each
// collective's kernel runs once with GraphHooks::capture = kPrepare (the
// ranks check the call agrees, host-synchronous, on the group); during it
// with kRecord (the NCCL call enqueued on the capturing stream) and hands
// back the host work each launch needs (ops/captured_work.h: the group's
// next seq and a flight-recorder entry before the launch, completed after
// it; the launch waited for under the collective timeout, a peer that never
// joins aborting the communicator). A capture is valid in the group it was
// made in only: under another (the group replaced after a failed job) the
// next run captures again, on every rank at once.
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
// Thread-safety: run() one at a time, under its replay plan's pool lease
// (ReplayPlan::run).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graphs/compiled_program.h"
#include "graphs/executable.h"
#include "graphs/executor.h"
#include "ops/captured_work.h"
#include "streams/stream_graph.h"

namespace tensord {

class DeviceGraph final : public Executable {
 public:
  // Whether every node of `cp` (and of its subprograms) can be captured on
  // backend `backend` (see above); `collectives`: top-level collectives
  // (capture-safe ones) may be captured too.
  static bool capturable(const CompiledProgram& cp, std::string_view backend, bool collectives = false);

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
  // Captures first when not captured yet, or captured under another group
  // than opts.ctx.group.
  ExecResult run(const std::map<std::string, Tensor>& inputs, const ExecOptions& opts) override;
  const CompiledProgram& program() const override { return *cp_; }
  // Captures now (without launching) on opts.ctx.stream, in opts.ctx.group:
  // an SPMD graph's members at capture time, so that a rank whose capture
  // fails fails the capture request. Throws what the capture threw.
  void capture(const ExecOptions& opts);

  bool captured() const { return graph_ != nullptr; }
  // Collectives captured in the graph (their host work per launch).
  size_t collectives() const { return work_.size(); }
  // Captures so far (a replaced group's graph is captured again).
  int64_t captures() const { return captures_; }
  // Device graph nodes (0 before the first replay).
  size_t nodes() const { return graph_ ? graph_->nodes() : 0; }
  // Bytes of device buffers the graph holds.
  int64_t bytes() const { return bytes_; }

 private:
  struct Frame;
  std::unique_ptr<Frame> make_frame(const CompiledProgram& cp, const std::vector<Tensor>& inputs);
  Tensor buffer(const TensorMeta& m);
  void capture(const Frame& f, const OpContext& ctx);
  // kPrepare: each top-level collective checks its call across the ranks.
  void prepare_collectives(const OpContext& ctx);
  bool stale(const OpContext& ctx) const;
  void capture_cond(const Frame& f, size_t node, const OpContext& ctx);
  void capture_while(const Frame& f, size_t node, const OpContext& ctx);
  void copy(const OpContext& ctx, const Tensor& dst, const Tensor& src);

  std::shared_ptr<const CompiledProgram> cp_;
  Backend* backend_;
  Device device_;
  std::shared_ptr<MemoryAccount> account_;
  std::unique_ptr<Frame> root_;
  // What each launch does on the host for the captured collectives; they
  // hold what the graph's collectives use (the communicator): declared
  // before graph_, so destroyed after it.
  std::vector<std::shared_ptr<CapturedWork>> work_;
  std::shared_ptr<StreamGraph> graph_;
  int64_t bytes_ = 0;
  // Every while_loop node and its loop state buffer, for the overflow check.
  std::vector<std::pair<const BoundNode*, Tensor>> loops_;
  int64_t captures_ = 0;
};

}  // namespace tensord
