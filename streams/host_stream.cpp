#include "streams/host_stream.h"

#include "ops/error.h"

namespace tensord {

void HostStream::enqueue(Task task) {
  std::unique_lock lock(mu_);
  if (capturing_) {
    captured_.push_back(std::move(task));
    return;
  }
  queue_.push_back(std::move(task));
  ++submitted_;
  if (!draining_) drain(lock);
}

void HostStream::drain(std::unique_lock<std::mutex>& lock) {
  draining_ = true;
  while (!queue_.empty()) {
    Task t = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr err;
    try {
      t();
    } catch (...) {
      err = std::current_exception();
    }
    t = nullptr;  // captured state dies outside the lock
    lock.lock();
    if (err && !error_) error_ = err;
    ++completed_;
    done_.notify_all();
  }
  draining_ = false;
}

int64_t HostStream::record() {
  std::lock_guard lock(mu_);
  if (capturing_) throw Error(ErrorCode::kConflict, "cannot record an event on a stream that is capturing");
  return submitted_;
}

void HostStream::wait_event(std::shared_ptr<HostStream> other, int64_t position) {
  if (other.get() == this) return;  // a stream is ordered with itself
  enqueue([other = std::move(other), position] { other->wait_until(position); });
}

void HostStream::wait_until(int64_t position) {
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return completed_ >= position; });
}

void HostStream::synchronize() {
  std::unique_lock lock(mu_);
  if (capturing_) throw Error(ErrorCode::kConflict, "cannot synchronize a stream that is capturing");
  done_.wait(lock, [&] { return completed_ >= submitted_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void HostStream::begin_capture() {
  std::lock_guard lock(mu_);
  if (capturing_) throw Error(ErrorCode::kConflict, "the stream is already capturing");
  capturing_ = true;
}

std::vector<HostStream::Task> HostStream::end_capture() {
  std::lock_guard lock(mu_);
  if (!capturing_) throw Error(ErrorCode::kConflict, "the stream is not capturing");
  capturing_ = false;
  return std::exchange(captured_, {});
}

bool HostStream::capturing() const {
  std::lock_guard lock(mu_);
  return capturing_;
}

int64_t HostStream::completed() const {
  std::lock_guard lock(mu_);
  return completed_;
}

}  // namespace tensord
