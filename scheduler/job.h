// A submitted job: its state machine (queued -> running -> succeeded |
// failed | cancelled), result or error, and cancellation flag. Shared by the
// engine (which drives it), the job table (which keeps it for GET
// /v1/jobs/{id}) and waiters. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "ops/error.h"
#include "scheduler/job_spec.h"

namespace tensord {

enum class JobState { kQueued, kRunning, kSucceeded, kFailed, kCancelled };
std::string_view job_state_name(JobState s);
inline bool is_final(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

class Job {
 public:
  using Clock = std::chrono::steady_clock;

  Job(std::string id, std::string tenant, std::string partition, std::string request_id = {})
      : id_(std::move(id)),
        tenant_(std::move(tenant)),
        partition_(std::move(partition)),
        request_id_(std::move(request_id)),
        created_(Clock::now()) {}

  const std::string& id() const { return id_; }
  const std::string& request_id() const { return request_id_; }  // the submitting request's (may be empty)
  const std::string& tenant() const { return tenant_; }
  const std::string& partition() const { return partition_; }
  Clock::time_point created() const { return created_; }

  JobState state() const;
  // The state a client is shown (GET /v1/jobs/{id}): a job that has ended
  // but whose end is still being recorded (on_final: metrics, the trace's
  // run span) reads as running, so a client that sees it ended finds it
  // in /metrics and /v1/trace.
  JobState observed_state() const;
  // queued -> running; false if the job already ended (cancelled while queued).
  bool start();
  void succeed(JobResult r);
  // Ends the job with `e`: state cancelled for kCancelled, else failed.
  // No-op when the job already ended.
  void fail(const Error& e);

  // Blocks until the job ends; returns the final state.
  JobState wait() const;
  // Requests cancellation; a job still queued ends at once as cancelled
  // (through the canceller, which removes it from its queue).
  void cancel(const std::string& why);
  // Calls `f` once when the job ends, on the thread that ends it (a runner,
  // or a canceller), after waiters are woken; at once, on the caller's
  // thread, when it already has. One callback per job (an async request's
  // reply); a second replaces the first if it has not run.
  void on_end(std::function<void()> f);
  // Calls `f` once at the job's end, on the thread that ends it, before
  // waiters wake and before on_end: the engine records the job's metrics
  // and trace there, so whoever the end answers sees them. Set by the
  // engine before the job can end (null clears it).
  void set_on_final(std::function<void(const Job&)> f);
  // Set by the engine at submit: removes the job from the scheduler's queue
  // and fails it; returns false when the job is no longer queued.
  void set_canceller(std::function<bool()> c);

  // Set by DELETE /v1/jobs/{id} or a disconnecting client; the executor
  // stops at the next node boundary.
  void request_cancel() { cancel_.store(true, std::memory_order_relaxed); }
  // The same, naming the error the job ends with instead of 499 cancelled
  // (a shutdown's drain cancels with 503 unavailable). The first reason wins.
  void request_cancel(const Error& why);
  // The reason given to request_cancel(why), if any.
  std::optional<Error> cancel_reason() const;
  const std::atomic<bool>& cancel_flag() const { return cancel_; }

  // Valid once ended: the error (failed/cancelled) or the result (succeeded).
  std::optional<Error> error() const;
  std::shared_ptr<const JobResult> result() const;
  // Moves the result out (a /v1/run answer takes it and keeps nothing, so
  // the tenant's memory drops as soon as the reply is sent).
  std::shared_ptr<const JobResult> take_result();
  Clock::time_point ended_at() const;
  double queue_ms() const;
  double run_ms() const;

 private:
  const std::string id_, tenant_, partition_, request_id_;
  const Clock::time_point created_;
  std::atomic<bool> cancel_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  JobState state_ = JobState::kQueued;
  bool finalized_ = false;  // ended() ran on_final: waiters and on_end may go
  Clock::time_point started_{}, ended_{};
  std::optional<Error> error_;
  std::optional<Error> cancel_reason_;
  std::shared_ptr<const JobResult> result_;
  std::function<bool()> canceller_;
  std::function<void()> on_end_;
  std::function<void(const Job&)> on_final_;
  void ended();  // after a transition to a final state: runs on_final_, wakes waiters, runs on_end_
};

}  // namespace tensord
