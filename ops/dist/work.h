// Work: the waitable handle of one collective (c10d's Work). A backend runs
// the collective on its own thread and reports through mark_started /
// finish / fail; the caller waits. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ops/dist/collective.h"
#include "ops/tensor.h"

namespace tensord::dist {

class FlightRecorder;

class Work {
 public:
  // wait(kNoTimeout): until the collective finishes (it has its own timeout).
  static constexpr std::chrono::milliseconds kNoTimeout{0};

  Work(std::string group, CollectiveOp op, uint64_t seq, std::shared_ptr<FlightRecorder> recorder, uint64_t record_id);
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  const std::string& group() const { return group_; }
  CollectiveOp op() const { return op_; }
  uint64_t seq() const { return seq_; }

  // True once the collective finished, successfully or not.
  bool is_completed() const;
  bool is_success() const;
  // Blocks until the collective finishes; rethrows its error (a
  // tensord::Error) on failure. Throws Error(kDeadlineExceeded) when
  // `timeout` passes first; the collective itself keeps running.
  void wait(std::chrono::milliseconds timeout = kNoTimeout);
  // The outputs, after a successful wait: one tensor (none for barrier).
  const std::vector<Tensor>& outputs() const;
  // outputs()[0].
  const Tensor& result() const;
  // The failure, if any (null while running or after success).
  std::exception_ptr exception() const;

  // Backend side: each called at most once, in this order, from the thread
  // that runs the collective.
  void mark_started();
  void finish(std::vector<Tensor> outputs);
  void fail(std::exception_ptr error);

 private:
  const std::string group_;
  const CollectiveOp op_;
  const uint64_t seq_;
  const std::shared_ptr<FlightRecorder> recorder_;
  const uint64_t record_id_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::vector<Tensor> outputs_;
};

}  // namespace tensord::dist
