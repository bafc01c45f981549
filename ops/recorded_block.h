// A kernel call reduced to one block function over fixed buffers, recorded
// while a captured graph's replay plan runs a node for the first time
// (graphs/replay_plan.h), so that later replays call the block function
// directly: no argument parsing, dtype dispatch, broadcast planning, output
// allocation or result vectors, only the arithmetic the kernel would have
// run, over the same buffers, in the same order.
//
// Who records: the CPU elementwise engine (ops/cpu/elementwise_loop.h) when
// OpContext::recorder is set and its call is a loop over at most two
// coalesced dims (operands contiguous, scalar or broadcast along rows; no
// dtype staging). A kernel that decides anything
// from tensor *data* before its loop (an integer division's zero check)
// calls reject(); ops opt in with OpDef::records_blocks, so a kernel that
// does other work besides its one loop never records. The plan keeps a
// recording only when the kernel made exactly one call, wrote its result
// into the node's slot and returned it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensord {

struct OpContext;

// out[i] = f(in0[i * s0], ...) for i < n, each stride 0 or 1 (elements).
using BlockFn = void (*)(const void* state, void* out, const void* const* in, const int64_t* in_stride, int64_t n);

struct RecordedBlock {
  static constexpr size_t kMaxState = 64;
  static constexpr int kMaxInputs = 3;

  BlockFn fn = nullptr;
  alignas(16) unsigned char state[kMaxState] = {};  // a copy of the kernel's functor
  bool has_state = false;
  int n_inputs = 0;
  void* out = nullptr;
  size_t out_elem = 0;    // bytes per output element
  int64_t out_count = 0;  // elements written: n, or 1 for a fold
  const void* in[kMaxInputs] = {};
  // Operands held here instead (in[k] unused): a literal scalar the kernel
  // converted to its compute type, which is the same on every run.
  alignas(16) unsigned char inline_in[kMaxInputs][16] = {};
  unsigned inline_mask = 0;
  size_t in_elem[kMaxInputs] = {};
  int64_t stride[kMaxInputs] = {};
  int64_t n = 0;
  // The loop's shape: `rows` of `row_len` elements (n = rows * row_len);
  // input k's row r starts row_stride[k] * r elements in (0: broadcast).
  // One row for a flat loop; two dims cover a bias over the last dims.
  int64_t rows = 1;
  int64_t row_len = 0;
  int64_t row_stride[kMaxInputs] = {};
  int64_t grain = 0;  // elements per task, as the kernel split them

  // Runs the loop again, split over ctx's pool as the kernel did.
  void run(const OpContext& ctx) const;
};

struct BlockRecorder {
  int calls = 0;
  bool ok = true;
  RecordedBlock block;

  void reject() { ok = false; }
  bool usable() const { return ok && calls == 1; }
};

}  // namespace tensord
