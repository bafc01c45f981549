// A captured graph's inference statistics as a model (API.md 11.1, Triton's
// statistics extension): counts and cumulative nanoseconds per stage of a
// KServe infer request. Written by the KServe routes, read by GET
// /v2/models/stats and the tensord_model_* families. Thread-safe: relaxed
// atomics, each figure consistent on its own (as Triton's, which a reader
// samples before and after a window).
#pragma once

#include <atomic>
#include <cstdint>

namespace tensord {

struct ModelStats {
  struct Duration {
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> ns{0};
    void add(uint64_t n) {
      count.fetch_add(1, std::memory_order_relaxed);
      ns.fetch_add(n, std::memory_order_relaxed);
    }
  };
  // Whole requests, from the handler's start to the answer's encoding.
  Duration success, fail;
  // Stages of the successful ones: waiting for the partition, decoding the
  // request into tensors, the replay, encoding the answer.
  Duration queue, compute_input, compute_infer, compute_output;
  std::atomic<uint64_t> inference_count{0};   // inferences (no batching: one per request)
  std::atomic<uint64_t> execution_count{0};   // replays run
  std::atomic<int64_t> last_inference_ms{0};  // ms since the epoch; 0: never
};

}  // namespace tensord
