// Admits work one at a time, without blocking a thread while it waits: the
// replays of graphs that share a pool (graphs/graph_pool.h), so that a
// second replay waits here, not on a partition runner.
//
//   if (gate.enter(later)) { ...admitted now... }  // else `later` runs when admitted
//   gate.release();                                // the admitted one is done
//
// Thread-safe. `later` runs on the thread that calls release(), outside the
// gate's lock; it is then the admitted one and must itself lead to exactly
// one release().
#pragma once

#include <deque>
#include <functional>
#include <mutex>

namespace tensord {

class SerialGate {
 public:
  // True when the caller is admitted now (it must call release() once done);
  // false when another is admitted: `later` is queued and called, admitted,
  // by the release() that frees the gate for it (FIFO).
  bool enter(std::function<void()> later);
  // Frees the gate: admits the first queued `later` (calls it), or leaves
  // the gate open.
  void release();
  size_t waiting() const;

 private:
  mutable std::mutex mu_;
  bool busy_ = false;
  std::deque<std::function<void()>> queue_;
};

}  // namespace tensord
