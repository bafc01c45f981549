#include "scheduler/job_scheduler.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <utility>

#include "scheduler/core_assignment.h"

#include <sched.h>

namespace tensord {

const char* job_event_kind_name(JobEvent::Kind kind) {
  switch (kind) {
    case JobEvent::Kind::kQueued:
      return "queued";
    case JobEvent::Kind::kStarted:
      return "started";
    case JobEvent::Kind::kFinished:
      return "finished";
    case JobEvent::Kind::kFailed:
      return "failed";
  }
  return "unknown";
}

JobScheduler::JobScheduler(std::vector<PartitionSpec> partitions, std::vector<TenantSpec> tenants,
                           std::shared_ptr<Clock> clock, int cores, Observer observer)
    : clock_(std::move(clock)), observer_(std::move(observer)), fq_(partitions, std::move(tenants)) {
  if (!clock_) clock_ = std::make_shared<SteadyClock>();
  if (cores <= 0) cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const auto logical = assign_cores(partitions, cores);
  const auto allowed = allowed_cpus();
  allowed_cpus_ = allowed;
  for (size_t i = 0; i < partitions.size(); ++i) {
    auto part = std::make_unique<PartitionRuntime>();
    part->name = partitions[i].name;
    part->cpus = to_physical(logical[i], allowed);
    part->pool = std::make_unique<ThreadPool>(static_cast<int>(logical[i].size()), part->cpus);
    part_by_name_[part->name] = part.get();
    parts_.push_back(std::move(part));
  }
  for (const auto& t : fq_.tenants()) counters_[t.name];
  // Threads start once every member is in place.
  for (size_t i = 0; i < partitions.size(); ++i) {
    PartitionRuntime& part = *parts_[i];
    for (int r = 0; r < partitions[i].workqueue_limit; ++r)
      part.runners.emplace_back([this, &part, r] { runner_loop(part, r); });
  }
  if (clock_->realtime()) timer_ = std::thread([this] { timer_loop(); });
}

JobScheduler::~JobScheduler() {
  shutdown();
}

void JobScheduler::emit_locked(JobEvent::Kind kind, const QueuedJob& job, double queue_s, double run_s,
                               const Error* error) {
  if (!observer_) return;
  JobEvent ev;
  ev.kind = kind;
  ev.id = job.id;
  ev.tenant = job.tenant;
  ev.partition = fq_.partition_of(job.tenant);
  ev.priority = job.priority;
  ev.queue_seconds = queue_s;
  ev.run_seconds = run_s;
  if (error) {
    ev.error = error->code();
    ev.message = error->message();
  }
  try {
    observer_(ev);
  } catch (...) {
    // An observer failure must not break scheduling.
  }
}

JobScheduler::Failure JobScheduler::drop_locked(const QueuedJob& job, const Error& error, int64_t Counters::*counter) {
  auto node = pending_.extract(job.id);
  ++(counters_[job.tenant].*counter);
  emit_locked(JobEvent::Kind::kFailed, job, seconds_between(job.enqueued, clock_->now()), 0, &error);
  return Failure{node.empty() ? FailFn{} : std::move(node.mapped().fail), error};
}

void JobScheduler::call_fails(std::vector<Failure>& failures) {
  for (auto& f : failures) {
    if (!f.fail) continue;
    try {
      f.fail(f.error);
    } catch (...) {
      // The caller's fail callback threw: nothing left to tell it.
    }
  }
  failures.clear();
}

uint64_t JobScheduler::enqueue_locked(const std::string& tenant, int priority, Clock::time_point deadline, RunFn run,
                                      FailFn fail) {
  if (stop_) throw Error(ErrorCode::kUnavailable, "server is shutting down");
  QueuedJob job;
  job.id = next_id_;
  job.tenant = tenant;
  job.priority = priority;
  job.enqueued = clock_->now();
  job.deadline = deadline;
  try {
    fq_.push(job);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kQueueFull) ++counters_[tenant].rejected;
    throw;
  }
  const uint64_t id = next_id_++;
  pending_.emplace(id, Pending{std::move(run), std::move(fail)});
  emit_locked(JobEvent::Kind::kQueued, job, 0, 0);
  return id;
}

uint64_t JobScheduler::submit(const std::string& tenant, int priority, Clock::time_point deadline, RunFn run,
                              FailFn fail) {
  PartitionRuntime* part = nullptr;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    id = enqueue_locked(tenant, priority, deadline, std::move(run), std::move(fail));
    part = part_by_name_.at(fq_.partition_of(tenant));
  }
  wake_for_queued(*part, deadline);
  return id;
}

namespace {

// The CPUs the calling thread may run on, read once per thread: the
// server's threads pin themselves as they start, before they submit.
const std::vector<int>& thread_cpus() {
  thread_local const std::vector<int> cpus = [] {
    std::vector<int> out;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) out.push_back(c);
    }
    return out;
  }();
  return cpus;
}

}  // namespace

void JobScheduler::wake_for_queued(PartitionRuntime& part, Clock::time_point deadline) {
  part.cv.notify_one();
  if (deadline != Clock::time_point::max()) timer_cv_.notify_one();
}

bool JobScheduler::on_cores_of(const PartitionRuntime& part) const {
  if (part.cpus == allowed_cpus_) return true;  // every core: wherever this thread runs
  const std::vector<int>& mine = thread_cpus();
  return !mine.empty() && std::includes(part.cpus.begin(), part.cpus.end(), mine.begin(), mine.end());
}

uint64_t JobScheduler::submit_or_run(const std::string& tenant, int priority, Clock::time_point deadline, RunFn run,
                                     FailFn fail) {
  std::unique_lock<std::mutex> lk(mu_);
  PartitionRuntime* part = part_by_name_.at(fq_.partition_of(tenant));
  // Nothing waits and a slot is free: a runner would start it now.
  const bool now = fq_.queue_depth(part->name) == 0 && fq_.inflight(part->name) < fq_.limit(part->name) &&
                   deadline > clock_->now() && on_cores_of(*part);
  const uint64_t id = enqueue_locked(tenant, priority, deadline, std::move(run), std::move(fail));
  // With nothing else queued, the pop is this job (or none: the tenant's own limits keep it queued).
  std::optional<QueuedJob> job;
  Clock::time_point start;
  if (now) {
    start = clock_->now();
    job = fq_.pop(part->name, start);
  }
  if (!job) {
    lk.unlock();
    wake_for_queued(*part, deadline);
    return id;
  }
  run_popped(*part, *job, start, 0, lk);
  // Jobs queued while it ran wait for a runner, which only looks again when woken.
  const bool waiting = fq_.queue_depth(part->name) > 0;
  lk.unlock();
  if (waiting) part->cv.notify_one();
  return id;
}

bool JobScheduler::cancel(uint64_t id) {
  std::vector<Failure> failures;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto job = fq_.cancel(id);
    if (!job) return false;
    failures.push_back(
        drop_locked(*job, Error(ErrorCode::kCancelled, "job cancelled while queued"), &Counters::cancelled));
  }
  call_fails(failures);
  return true;
}

void JobScheduler::expire_locked(Clock::time_point now, std::vector<Failure>& out) {
  for (const auto& job : fq_.expire(now)) {
    out.push_back(
        drop_locked(job, Error(ErrorCode::kDeadlineExceeded, "deadline exceeded while queued"), &Counters::expired));
  }
}

size_t JobScheduler::poll() {
  std::vector<Failure> failures;
  {
    std::lock_guard<std::mutex> lk(mu_);
    expire_locked(clock_->now(), failures);
  }
  const size_t n = failures.size();
  call_fails(failures);
  return n;
}

void JobScheduler::runner_loop(PartitionRuntime& part, int index) {
  pin_current_thread(part.cpus);
  yield_to_io_threads();
  std::vector<Failure> failures;
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    expire_locked(clock_->now(), failures);
    if (!failures.empty()) {
      lk.unlock();
      call_fails(failures);
      lk.lock();
      continue;
    }
    const Clock::time_point start = clock_->now();
    std::optional<QueuedJob> job = fq_.pop(part.name, start);
    if (!job) {
      if (stop_) return;
      part.cv.wait(lk);
      continue;
    }
    run_popped(part, *job, start, index, lk);
  }
}

void JobScheduler::run_popped(PartitionRuntime& part, const QueuedJob& job, Clock::time_point start, int runner,
                              std::unique_lock<std::mutex>& lk) {
  const double queue_s = seconds_between(job.enqueued, start);
  emit_locked(JobEvent::Kind::kStarted, job, queue_s, 0);
  std::optional<Error> error;
  double run_s = 0;
  {
    auto node = pending_.extract(job.id);
    lk.unlock();
    // The callbacks live (and die) outside the lock.
    Pending cb = node.empty() ? Pending{} : std::move(node.mapped());
    PartitionContext ctx;
    ctx.partition = part.name;
    ctx.tenant = job.tenant;
    ctx.pool = part.pool.get();
    ctx.job_id = job.id;
    ctx.runner = runner;
    ctx.queue_seconds = queue_s;
    ctx.deadline = job.deadline;
    try {
      if (cb.run) cb.run(ctx);
    } catch (const Error& e) {
      error = e;
    } catch (const std::exception& e) {
      error = Error(ErrorCode::kInternal, e.what());
    } catch (...) {
      error = Error(ErrorCode::kInternal, "job failed with a non-standard exception");
    }
    run_s = std::max(0.0, seconds_between(start, clock_->now()));
    if (error && cb.fail) {
      try {
        cb.fail(*error);
      } catch (...) {
      }
    }
  }
  lk.lock();
  fq_.finished(job, clock_->now(), run_s);
  if (error) {
    ++counters_[job.tenant].failed;
    emit_locked(JobEvent::Kind::kFailed, job, queue_s, run_s, &*error);
  } else {
    emit_locked(JobEvent::Kind::kFinished, job, queue_s, run_s);
  }
}

void JobScheduler::timer_loop() {
  std::vector<Failure> failures;
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    const auto next = fq_.next_deadline();
    if (!next) {
      timer_cv_.wait(lk);
    } else if (clock_->now() < *next) {
      // realtime() clocks are steady_clock, so the deadline is a steady time.
      timer_cv_.wait_until(lk, *next);
    } else {
      expire_locked(clock_->now(), failures);
      lk.unlock();
      call_fails(failures);
      lk.lock();
    }
  }
}

void JobScheduler::reconfigure(const std::vector<PartitionSpec>& partitions, const std::vector<TenantSpec>& tenants) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) return;
    fq_.reconfigure(partitions, tenants);
    for (const auto& t : tenants) counters_[t.name];
    // One runner per slot: a raised limit needs more runners. shutdown()
    // joins them: it sets stop_ under mu_ first, so none is added after.
    for (auto& part : parts_) {
      const int want = fq_.limit(part->name);
      PartitionRuntime* p = part.get();
      while (static_cast<int>(p->runners.size()) < want) {
        const int index = static_cast<int>(p->runners.size());
        p->runners.emplace_back([this, p, index] { runner_loop(*p, index); });
      }
    }
  }
  // Limits may have risen: let waiting runners look again.
  for (auto& p : parts_) p->cv.notify_all();
}

void JobScheduler::close() {
  std::vector<Failure> failures;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!stop_) {
      stop_ = true;
      const Error err(ErrorCode::kUnavailable, "server is shutting down");
      for (const auto& job : fq_.drain()) failures.push_back(drop_locked(job, err, &Counters::cancelled));
    }
  }
  for (auto& p : parts_) p->cv.notify_all();
  timer_cv_.notify_all();
  call_fails(failures);
}

void JobScheduler::shutdown() {
  close();
  std::lock_guard<std::mutex> jl(join_mu_);
  if (joined_) return;
  for (auto& p : parts_) {
    for (auto& r : p->runners) r.join();
  }
  if (timer_.joinable()) timer_.join();
  joined_ = true;
}

SchedulerStats JobScheduler::stats() const {
  SchedulerStats s;
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& p : parts_) {
    SchedulerStats::Partition ps;
    ps.name = p->name;
    ps.inflight = fq_.inflight(p->name);
    ps.limit = fq_.limit(p->name);
    ps.queued = fq_.queue_depth(p->name);
    ps.busy_seconds = fq_.partition_busy_seconds(p->name);
    ps.threads = p->pool->size();
    ps.cpus = p->cpus;
    s.partitions.push_back(std::move(ps));
  }
  for (const auto& t : fq_.tenants()) {
    SchedulerStats::Tenant ts;
    ts.name = t.name;
    ts.partition = t.partition;
    ts.queued = fq_.queued(t.name);
    ts.running = fq_.running(t.name);
    ts.busy_seconds = fq_.busy_seconds(t.name);
    ts.completed = fq_.completed(t.name);
    const Counters& c = counters_.at(t.name);
    ts.failed = c.failed;
    ts.cancelled = c.cancelled;
    ts.expired = c.expired;
    ts.rejected = c.rejected;
    s.tenants.push_back(std::move(ts));
  }
  return s;
}

ThreadPool& JobScheduler::pool(const std::string& partition) {
  auto it = part_by_name_.find(partition);
  if (it == part_by_name_.end()) throw Error(ErrorCode::kInternal, "scheduler: unknown partition '" + partition + "'");
  return *it->second->pool;
}

const std::vector<int>& JobScheduler::cpus(const std::string& partition) const {
  auto it = part_by_name_.find(partition);
  if (it == part_by_name_.end()) throw Error(ErrorCode::kInternal, "scheduler: unknown partition '" + partition + "'");
  return it->second->cpus;
}

const std::string& JobScheduler::partition_of(const std::string& tenant) const {
  std::lock_guard<std::mutex> lk(mu_);
  return fq_.partition_of(tenant);
}

}  // namespace tensord
