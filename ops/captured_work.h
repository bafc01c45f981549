// CapturedWork: the host side of a kernel captured into a device graph
// (graphs/device_graph.h), done around every launch of the graph. A
// collective captured on its group's communicator (API.md 8: "on CUDA,
// NCCL kernels are captured into the graph") takes the group's next seq and
// a flight-recorder entry per launch, as if it ran uncaptured, and the
// launch is waited for under the group's timeout: a peer that never joins
// aborts the communicator instead of hanging the rank
// (ops/dist/captured_collective.h). A graph calls, per launch and in
// capture order: before_launch on each, the launch, launched on each, wait
// on each, then finished on each (a wait that threw: finished(false)).
#pragma once

#include "ops/op_registry.h"

namespace tensord {

class CapturedWork {
 public:
  virtual ~CapturedWork() = default;
  // Whether the graph may still launch this capture under `ctx` (a
  // collective: only in the group, of the generation, it was captured in;
  // false: the graph must be captured again).
  virtual bool valid_for(const OpContext& ctx) const = 0;
  // Before the launch: throws (nothing launched) when it cannot run.
  virtual void before_launch() = 0;
  // The launch is enqueued on the stream.
  virtual void launched() = 0;
  // Until the stream has run the launch, bounded and cancellable
  // (ctx.cancelled); throws when it gave up.
  virtual void wait(const OpContext& ctx) = 0;
  // The launch ended: ran to its end (ok) or not.
  virtual void finished(bool ok) = 0;
};

}  // namespace tensord
