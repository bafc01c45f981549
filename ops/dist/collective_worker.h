// CollectiveWorker: the thread a ProcessGroup runs its collectives on, one
// at a time, in the order they were queued (seq order: ProcessGroup queues
// under its seq lock). What every backend needs around the call itself:
// the queue, the thread, marking each Work started and finishing or
// failing it with what the call returned or threw, failing what is still
// queued when the group is aborted or destroyed. The call is the backend's
// (ProcessGroup::run).
//
// Thread-safety: push, fail_queued and stop from any thread; the calls run
// on the worker's thread only.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ops/dist/collective.h"
#include "ops/dist/work.h"
#include "ops/error.h"
#include "ops/tensor.h"

namespace tensord::dist {

class CollectiveWorker {
 public:
  struct Task {
    CollectiveCall call;
    std::shared_ptr<Work> work;
    // A check across the ranks before a graph capture
    // (ProcessGroup::agree_captured): no transfer, no seq.
    bool agree_only = false;
  };
  // Runs on the worker's thread: the task's outputs, or throws (the Work
  // fails with what it threw).
  using Run = std::function<std::vector<Tensor>(const Task&)>;
  // The error a task still queued fails with.
  using Refusal = std::function<Error(const CollectiveCall&)>;

  CollectiveWorker() = default;
  CollectiveWorker(const CollectiveWorker&) = delete;
  CollectiveWorker& operator=(const CollectiveWorker&) = delete;
  // stop() if the owner did not.
  ~CollectiveWorker();

  // Starts the thread; `on_start` runs on it first (a device's context).
  void start(Run run, std::function<void()> on_start = {});
  // Queues a task; false (nothing queued) once stop() began.
  bool push(Task t);
  // Fails every task still queued (not the running one) with refusal(call).
  void fail_queued(const Refusal& refusal);
  // Takes no more tasks, fails the queued ones with refusal(call), calls
  // `interrupt` (which may end the running call early), and waits for the
  // running call. Idempotent.
  void stop(const Refusal& refusal, const std::function<void()>& interrupt = {});

 private:
  void loop(const Run& run, const std::function<void()>& on_start);
  std::deque<Task> take_queued();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tensord::dist
