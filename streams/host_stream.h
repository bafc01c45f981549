// HostStream: the CPU backend's stream, an ordered executor of host tasks
// (a strand): tasks run one at a time in enqueue order. Whoever enqueues
// into an idle stream runs the queue on its own thread (a partition worker
// or job runner) until it is empty; an enqueue into a busy stream returns at
// once and the thread already draining runs it. Events are positions in the
// stream (count of tasks enqueued); wait_event enqueues a barrier that holds
// the tasks behind it until another stream reaches a position.
//
// Capture (the CPU half of torch.accelerator.Graph): between begin_capture
// and end_capture, enqueued tasks are recorded instead of run, and returned
// by end_capture for replay. As in CUDA, synchronize and record are illegal
// while capturing (409 conflict), and so is a second begin_capture.
//
// The first exception a task throws is kept and rethrown by the next
// synchronize (later tasks still run). Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace tensord {

class HostStream {
 public:
  using Task = std::function<void()>;

  void enqueue(Task task);
  // The position after every task enqueued so far (an event).
  int64_t record();
  // Enqueues a barrier: tasks enqueued after it wait until `other` has
  // completed `position` tasks (cudaStreamWaitEvent).
  void wait_event(std::shared_ptr<HostStream> other, int64_t position);
  // Blocks the caller until this stream has completed `position` tasks.
  void wait_until(int64_t position);
  // Blocks until every enqueued task has run; rethrows the first error.
  void synchronize();

  void begin_capture();
  std::vector<Task> end_capture();
  bool capturing() const;

  int64_t completed() const;

 private:
  void drain(std::unique_lock<std::mutex>& lock);

  mutable std::mutex mu_;
  std::condition_variable done_;
  std::deque<Task> queue_;
  int64_t submitted_ = 0;
  int64_t completed_ = 0;
  bool draining_ = false;
  bool capturing_ = false;
  std::vector<Task> captured_;
  std::exception_ptr error_;
};

}  // namespace tensord
