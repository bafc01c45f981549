// The threaded driver of FairQueue. Per partition: a compute ThreadPool of
// max(1, round(share * cores)) threads and `workqueue_limit` runner threads,
// all pinned to the partition's cores (core_assignment.h); runners start
// jobs in FairQueue order and call their `run` callback. Queued jobs expire
// at their deadline: a timer thread sleeps until the earliest one when the
// clock is realtime(); with a ManualClock the tests call poll() (runners
// also expire due jobs before each start), so no test sleeps.
//
// Thread-safe. Contract for callbacks:
//  - exactly one of these happens per accepted job: `run` returns normally,
//    or `fail` is called once (cancelled / deadline passed while queued /
//    shutdown / `run` threw, with that exception as an Error);
//  - run and fail are called without the scheduler lock held (they may call
//    back into the scheduler); exceptions from them never kill a thread;
//  - the observer is called WITH the scheduler lock held, in transition
//    order: it must be quick and must not call into the JobScheduler.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ops/cpu/thread_pool.h"
#include "scheduler/clock.h"
#include "scheduler/fair_queue.h"
#include "scheduler/scheduler_types.h"

namespace tensord {

class JobScheduler {
 public:
  using RunFn = std::function<void(const PartitionContext&)>;
  using FailFn = std::function<void(const Error&)>;
  using Observer = std::function<void(const JobEvent&)>;

  // cores <= 0: hardware concurrency. Throws Error(kInvalidArgument) on a
  // bad configuration (see FairQueue).
  JobScheduler(std::vector<PartitionSpec> partitions, std::vector<TenantSpec> tenants,
               std::shared_ptr<Clock> clock = std::make_shared<SteadyClock>(), int cores = 0, Observer observer = {});
  ~JobScheduler();  // shutdown()
  JobScheduler(const JobScheduler&) = delete;
  JobScheduler& operator=(const JobScheduler&) = delete;

  // Queues a job; returns its id. Throws QueueFullError (429, with
  // retry_after_seconds()) when the tenant's queue is full, Error(kInternal)
  // for an unknown tenant, Error(kUnavailable) after shutdown().
  // deadline: Clock::time_point::max() for none.
  uint64_t submit(const std::string& tenant, int priority, Clock::time_point deadline, RunFn run, FailFn fail);

  // As submit(), but a job that would start at once runs on the calling
  // thread before this returns: when the thread runs on the tenant's
  // partition's cores (pinned within them, or the partition has every core
  // this process may use), nothing is queued on the partition and it has a
  // free slot. It then takes that slot as a runner would (the workqueue
  // limit, the fair queue's accounting, the events and counters hold), so
  // it overtakes no one. Otherwise it is queued as by submit(). For work
  // known to be short: the caller's thread (an HTTP thread) is busy meanwhile.
  uint64_t submit_or_run(const std::string& tenant, int priority, Clock::time_point deadline, RunFn run, FailFn fail);

  // A queued job is removed and its fail(kCancelled) called: true. A running
  // (or finished, or unknown) job: false; running jobs stop cooperatively
  // through the caller's own flag.
  bool cancel(uint64_t id);

  // Fails the queued jobs whose deadline has passed (kDeadlineExceeded);
  // returns how many. The timer thread calls it; tests with a ManualClock
  // call it after advance().
  size_t poll();

  // A config reload (FairQueue::reconfigure): new workqueue limits for
  // existing partitions, the new set of tenants and their weights and limits.
  // Queued and running jobs are kept: a removed tenant's jobs still run, a
  // lower limit lets running jobs finish and starts no new one until
  // in-flight drops below it, a higher one adds runner threads. Throws
  // Error(kInvalidArgument) before changing anything; no-op after shutdown().
  void reconfigure(const std::vector<PartitionSpec>& partitions, const std::vector<TenantSpec>& tenants);

  // Stops accepting jobs and fails every queued job (kUnavailable); running
  // jobs go on. Does not block on them (a drain calls it from the server's
  // control strand). Idempotent.
  void close();
  // close(), then waits for running jobs to return and joins all threads.
  // Idempotent.
  void shutdown();

  SchedulerStats stats() const;
  ThreadPool& pool(const std::string& partition);
  const std::vector<int>& cpus(const std::string& partition) const;  // physical CPU ids
  const std::string& partition_of(const std::string& tenant) const;
  const Clock& clock() const { return *clock_; }

 private:
  struct Pending {
    RunFn run;
    FailFn fail;
  };
  struct PartitionRuntime {
    std::string name;
    std::unique_ptr<ThreadPool> pool;
    std::vector<int> cpus;
    std::condition_variable cv;        // runners wait here for work
    std::vector<std::thread> runners;  // grows (under mu_) when a reload raises the limit
  };
  struct Counters {
    int64_t failed = 0, cancelled = 0, expired = 0, rejected = 0;
  };
  struct Failure {
    FailFn fail;
    Error error;
  };

  void runner_loop(PartitionRuntime& part, int index);
  // Queues a job (the lock held); returns its id.
  uint64_t enqueue_locked(const std::string& tenant, int priority, Clock::time_point deadline, RunFn run, FailFn fail);
  // Runs a job fq_.pop() just started (the lock held on entry and on
  // return, released while its callbacks run) and records its end.
  void run_popped(PartitionRuntime& part, const QueuedJob& job, Clock::time_point start, int runner,
                  std::unique_lock<std::mutex>& lk);
  // A job was queued (the lock released): a runner of `part` looks, and
  // the timer thread when it has a deadline.
  void wake_for_queued(PartitionRuntime& part, Clock::time_point deadline);
  // Whether the calling thread runs on the partition's cores.
  bool on_cores_of(const PartitionRuntime& part) const;
  void timer_loop();
  // Removes queued jobs past their deadline; their fail callbacks go to `out`.
  void expire_locked(Clock::time_point now, std::vector<Failure>& out);
  // Takes the pending callbacks of a job that leaves the queue without
  // running and reports it; `counter` is bumped.
  Failure drop_locked(const QueuedJob& job, const Error& error, int64_t Counters::*counter);
  void emit_locked(JobEvent::Kind kind, const QueuedJob& job, double queue_s, double run_s,
                   const Error* error = nullptr);
  static void call_fails(std::vector<Failure>& failures);

  std::shared_ptr<Clock> clock_;
  Observer observer_;
  mutable std::mutex mu_;
  FairQueue fq_;
  std::unordered_map<uint64_t, Pending> pending_;  // queued and running jobs
  std::unordered_map<std::string, Counters> counters_;
  std::vector<std::unique_ptr<PartitionRuntime>> parts_;
  std::vector<int> allowed_cpus_;  // the process's (allowed_cpus())
  std::unordered_map<std::string, PartitionRuntime*> part_by_name_;
  uint64_t next_id_ = 1;
  bool stop_ = false;
  std::condition_variable timer_cv_;
  std::thread timer_;
  std::mutex join_mu_;  // serializes the joining half of shutdown()
  bool joined_ = false;
};

}  // namespace tensord
