// What a graph's runner (graphs/) hands the kernels it calls, behind one
// pointer of their OpContext (OpContext::graph): where a replay wants a
// node's results, where it records a node's loop, and where a device
// graph's capture is. The runner owns the hooks for the calls it makes; a
// kernel outside a graph sees none. Included by the kernels that use them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ops/tensor.h"

namespace tensord {

struct BlockRecorder;
class CapturedWork;

// Buffers bound to a node's results ahead of time (a captured graph's
// replay, graphs/replay_plan.h): OpContext::empty hands out slots[next]
// instead of allocating when its dtype and shape match, and moves on; a
// request that does not match (a temporary) allocates as usual. The caller
// checks which results landed in their slot. Used by one kernel call at a
// time; kernels allocate before they fan out to the pool.
struct OutputSlots {
  const Tensor* slots = nullptr;
  size_t count = 0;
  size_t next = 0;
};

// Where a device graph's capture is (graphs/device_graph.h), for the
// kernels that care (the dist.* collectives; every other kernel is called
// in kRecord only, and only launches on ctx.stream):
// kPrepare: before the stream capture begins: a collective checks its call
//   across the group's ranks (host-synchronous) and launches nothing;
// kRecord: during the stream capture: a collective enqueues on ctx.stream
//   through its group (ProcessGroup::enqueue_captured) and hands the work
//   each replay does for it to GraphHooks::captured_work.
enum class CapturePhase : uint8_t { kNone, kPrepare, kRecord };

struct GraphHooks {
  // A replay's pre-bound results for one kernel call (OpContext::empty).
  OutputSlots* out_slots = nullptr;
  // A replay plan's recording of a node's first run: the CPU elementwise
  // engine records its loop there (ops/recorded_block.h).
  BlockRecorder* recorder = nullptr;
  CapturePhase capture = CapturePhase::kNone;
  // kRecord: where a captured kernel adds the host work every launch of the
  // graph needs (ops/captured_work.h).
  std::vector<std::shared_ptr<CapturedWork>>* captured_work = nullptr;
};

// What a kernel reads of its context's hooks (OpContext::graph, null
// outside a graph's runner): the recorder (null: record nothing) and the
// capture phase (kNone: not capturing).
inline BlockRecorder* graph_recorder(const GraphHooks* g) {
  return g ? g->recorder : nullptr;
}
inline CapturePhase graph_capture(const GraphHooks* g) {
  return g ? g->capture : CapturePhase::kNone;
}

}  // namespace tensord
