#include "scheduler/job.h"

namespace tensord {

std::string_view job_state_name(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRunning:
      return "running";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "failed";
}

JobState Job::state() const {
  std::lock_guard<std::mutex> lk(mu_);
  return state_;
}

JobState Job::observed_state() const {
  std::lock_guard<std::mutex> lk(mu_);
  return is_final(state_) && !finalized_ ? JobState::kRunning : state_;
}

bool Job::start() {
  std::lock_guard<std::mutex> lk(mu_);
  if (state_ != JobState::kQueued) return false;
  state_ = JobState::kRunning;
  started_ = Clock::now();
  return true;
}

void Job::succeed(JobResult r) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (is_final(state_)) return;
    state_ = JobState::kSucceeded;
    ended_ = Clock::now();
    // Its times are final now: the result carries them (queue_ms(), run_ms()).
    const auto until_start = started_ == Clock::time_point{} ? ended_ : started_;
    r.queue_ms = std::chrono::duration<double, std::milli>(until_start - created_).count();
    r.run_ms =
        started_ == Clock::time_point{} ? 0 : std::chrono::duration<double, std::milli>(ended_ - started_).count();
    result_ = std::make_shared<const JobResult>(std::move(r));
  }
  ended();
}

void Job::request_cancel(const Error& why) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!cancel_reason_) cancel_reason_ = why;
  }
  request_cancel();
}

std::optional<Error> Job::cancel_reason() const {
  std::lock_guard<std::mutex> lk(mu_);
  return cancel_reason_;
}

void Job::ended() {
  std::function<void(const Job&)> fin;
  std::function<void()> f;
  {
    std::lock_guard<std::mutex> lk(mu_);
    fin.swap(on_final_);
  }
  if (fin) fin(*this);
  {
    // Only now do waiters and on_end see the end: a callback registered
    // while on_final runs must not overtake it (it would answer before
    // the job is counted).
    std::lock_guard<std::mutex> lk(mu_);
    finalized_ = true;
    f.swap(on_end_);
  }
  cv_.notify_all();
  if (f) f();
}

void Job::set_on_final(std::function<void(const Job&)> f) {
  std::lock_guard<std::mutex> lk(mu_);
  on_final_ = std::move(f);
}

void Job::on_end(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!finalized_) {
      on_end_ = std::move(f);
      return;
    }
  }
  f();
}

void Job::fail(const Error& e) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (is_final(state_)) return;
    state_ = e.code() == ErrorCode::kCancelled ? JobState::kCancelled : JobState::kFailed;
    ended_ = Clock::now();
    if (started_ == Clock::time_point{}) started_ = ended_;
    error_ = e;
  }
  ended();
}

JobState Job::wait() const {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return finalized_; });
  return state_;
}

void Job::cancel(const std::string& why) {
  request_cancel();
  std::function<bool()> c;
  {
    std::lock_guard<std::mutex> lk(mu_);
    c = canceller_;
  }
  if (c && c()) return;  // the scheduler removed it and failed it
  if (state() == JobState::kQueued && !c) fail(Error(ErrorCode::kCancelled, why));
}

void Job::set_canceller(std::function<bool()> c) {
  std::lock_guard<std::mutex> lk(mu_);
  canceller_ = std::move(c);
}

std::optional<Error> Job::error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

std::shared_ptr<const JobResult> Job::result() const {
  std::lock_guard<std::mutex> lk(mu_);
  return result_;
}

std::shared_ptr<const JobResult> Job::take_result() {
  std::lock_guard<std::mutex> lk(mu_);
  return std::move(result_);
}

Job::Clock::time_point Job::ended_at() const {
  std::lock_guard<std::mutex> lk(mu_);
  return ended_;
}

double Job::queue_ms() const {
  std::lock_guard<std::mutex> lk(mu_);
  auto until = started_ == Clock::time_point{} ? Clock::now() : started_;
  return std::chrono::duration<double, std::milli>(until - created_).count();
}

double Job::run_ms() const {
  std::lock_guard<std::mutex> lk(mu_);
  if (started_ == Clock::time_point{}) return 0;
  auto until = ended_ == Clock::time_point{} ? Clock::now() : ended_;
  return std::chrono::duration<double, std::milli>(until - started_).count();
}

}  // namespace tensord
