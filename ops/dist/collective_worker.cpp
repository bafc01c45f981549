#include "ops/dist/collective_worker.h"

#include <exception>
#include <utility>

namespace tensord::dist {

CollectiveWorker::~CollectiveWorker() {
  stop([](const CollectiveCall& c) {
    return Error(ErrorCode::kCancelled,
                 std::string(collective_op_name(c.op)) + " (seq " + std::to_string(c.seq) + ") was cancelled");
  });
}

void CollectiveWorker::start(Run run, std::function<void()> on_start) {
  thread_ = std::thread([this, run = std::move(run), on_start = std::move(on_start)] { loop(run, on_start); });
}

bool CollectiveWorker::push(Task t) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    queue_.push_back(std::move(t));
  }
  cv_.notify_one();
  return true;
}

std::deque<CollectiveWorker::Task> CollectiveWorker::take_queued() {
  std::deque<Task> pending;
  std::lock_guard lock(mu_);
  pending.swap(queue_);
  return pending;
}

void CollectiveWorker::fail_queued(const Refusal& refusal) {
  // Failed outside the lock: a Work's waiters may queue again at once.
  for (Task& t : take_queued()) t.work->fail(std::make_exception_ptr(refusal(t.call)));
}

void CollectiveWorker::stop(const Refusal& refusal, const std::function<void()>& interrupt) {
  std::deque<Task> pending;
  {
    // One step, so the thread starts none of the queued tasks.
    std::lock_guard lock(mu_);
    stopping_ = true;
    pending.swap(queue_);
  }
  cv_.notify_all();
  for (Task& t : pending) t.work->fail(std::make_exception_ptr(refusal(t.call)));
  if (interrupt) interrupt();
  if (thread_.joinable()) thread_.join();
}

void CollectiveWorker::loop(const Run& run, const std::function<void()>& on_start) {
  if (on_start) on_start();
  for (;;) {
    Task t;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      t = std::move(queue_.front());
      queue_.pop_front();
    }
    t.work->mark_started();
    try {
      t.work->finish(run(t));
    } catch (...) {
      t.work->fail(std::current_exception());
    }
  }
}

}  // namespace tensord::dist
