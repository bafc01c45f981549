#include "scheduler/engine.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>

#include "graphs/compiled_program.h"
#include "graphs/executor.h"
#include "graphs/program_executable.h"
#include "metrics/log.h"
#include "ops/error.h"
#include "scheduler/engine_metrics.h"
#include "scheduler/engine_trace.h"
#include "scheduler/job_scheduler.h"
#include "scheduler/collective_metrics.h"
#include "scheduler/rank_workers.h"
#include "scheduler/running_jobs.h"
#include "scheduler/spmd_peers.h"
#include "scheduler/spmd_plan.h"
#include "scheduler/spmd/spmd_executable.h"
#include "scheduler/spmd/spmd_keys.h"
#include "scheduler/engine_work.h"
#include "streams/stream_pool.h"

namespace tensord {

Engine::Engine(std::unique_ptr<Backend> backend, const ServerConfig& config, const EngineOptions& opts)
    : backend_(std::move(backend)), config_(config) {
  validate_config(config_);
  devices_ = backend_->devices();  // fixed for the process; asking reads /proc
  cpu_only_ = devices_.empty() || devices_[0].device.type == DeviceType::kCPU;
  // On CUDA each local rank has a GPU of its own (API.md 8): checked before
  // any thread starts.
  TENSORD_CHECK(backend_->name() != "cuda" || opts.ranks <= static_cast<int>(devices_.size()), kInvalidArgument,
                "--ranks " + std::to_string(opts.ranks) + " needs " + std::to_string(opts.ranks) +
                    " GPUs on the CUDA backend (one per rank); " + std::to_string(devices_.size()) + " visible");
  metrics_ = std::make_unique<EngineMetrics>(std::string(backend_->name()), opts.metrics);
  EngineMetrics* m = metrics_.get();
  const Device dev = devices_.empty() ? Device{} : devices_[0].device;
  backend_->set_partitions(config_.partitions);
  for (size_t i = 0; i < config_.partitions.size(); ++i) {
    const auto& p = config_.partitions[i];
    streams_[p.name] =
        std::make_unique<StreamPool>(*backend_, dev, std::max(1, p.workqueue_limit), static_cast<int>(i));
  }
  scheduler_ = std::make_unique<JobScheduler>(config_.partitions, config_.tenants, opts.clock, opts.cores,
                                              [m](const JobEvent& e) { m->on_event(e); });
  for (const auto& p : config_.partitions) m->inflight(p.name, 0, p.workqueue_limit);
  for (const auto& t : config_.tenants) {
    m->tenant_memory(t.name, 0, t.memory_bytes);
    m->tenant_registered(t.name);
  }
  libraries_ = std::make_shared<const std::map<std::string, std::string>>(backend_->libraries());
  record_device_memory();
  running_ = std::make_unique<RunningJobs>();
  collective_metrics_ = std::make_unique<CollectiveMetrics>(opts.metrics);
  RankWorkersOptions ro;
  ro.ranks = opts.ranks;
  ro.world_size = opts.world_size;
  ro.rank_offset = opts.rank_offset;
  ro.make_store = opts.make_store;
  ro.hostname = opts.rank_hostname;
  ro.collective_timeout = opts.collective_timeout;
  ro.flight_recorder_entries = opts.flight_recorder_entries;
  CollectiveMetrics* cm = collective_metrics_.get();
  ro.on_collective = [cm](const std::string& group, int rank, dist::CollectiveOp op, size_t bytes) {
    cm->submitted(group, op, bytes, rank == 0);
  };
  ro.groups = opts.rank_groups;
  if (backend_->name() == "cuda") {
    // One GPU per local rank (API.md 8), each rank with a stream of its own.
    for (int r = 0; r < opts.ranks; ++r) {
      const Device d = devices_[static_cast<size_t>(r)].device;
      rank_places_.push_back(RankPlace{d, backend_->create_stream(d)});
    }
  }
  ranks_ = std::make_unique<RankWorkers>(std::move(ro));
  on_collective_timeout_ = opts.on_collective_timeout;
  keys_ = std::make_unique<SpmdKeys>();
  if (metrics_->enabled()) {
    busy_ticker_ = std::thread([this, m] {
      std::unique_lock<std::mutex> lk(ticker_mu_);
      while (!ticker_cv_.wait_for(lk, std::chrono::seconds(1), [this] { return ticker_stop_; })) {
        running_->flush_busy(RunningJobs::Clock::now(),
                             [m](const std::string& t, const std::string& p, double s) { m->tenant_busy(t, p, s); });
      }
    });
  }
}

void Engine::record_device_memory() {
  for (const auto& d : devices_) {
    metrics_->device_memory(d.device.str(), backend_->allocated_bytes(d.device), d.total_memory);
  }
}

Engine::~Engine() {
  shutdown();
}

void Engine::begin_drain() {
  scheduler_->close();
}

size_t Engine::cancel_running(const Error& why) {
  return running_->cancel_all(why);
}

size_t Engine::running_jobs() const {
  return running_->size();
}

void Engine::shutdown() {
  scheduler_->shutdown();
  {
    std::lock_guard<std::mutex> lk(ticker_mu_);
    ticker_stop_ = true;
  }
  ticker_cv_.notify_all();
  if (busy_ticker_.joinable()) busy_ticker_.join();
}

ServerConfig Engine::config() const {
  std::lock_guard<std::mutex> lk(config_mu_);
  return config_;
}

void Engine::reload(const ServerConfig& config) {
  validate_config(config);
  scheduler_->reconfigure(config.partitions, config.tenants);
  {
    std::lock_guard<std::mutex> lk(config_mu_);
    config_ = config;
  }
  for (const auto& p : scheduler_->stats().partitions) metrics_->inflight(p.name, p.inflight, p.limit);
  for (const auto& t : config.tenants) metrics_->tenant_registered(t.name);
}

SchedulerStats Engine::stats() const {
  return scheduler_->stats();
}

std::vector<int> Engine::partition_cpus(const std::string& partition) const {
  try {
    return scheduler_->cpus(partition);
  } catch (const Error&) {
    return {};
  }
}

namespace {

// A program whose run is short whatever its data: a few nodes, no control
// flow (a loop's trip count is data), every value small (so an O(n^3)
// kernel is small too). Such a fresh /v1/run program may run on the
// submitting thread (Engine::kRunHereSeconds) before it has a history.
bool is_small(const CompiledProgram& cp) {
  constexpr size_t kMostNodes = 32;
  constexpr size_t kMostBytes = 16 << 10;
  if (cp.nodes.size() > kMostNodes) return false;
  for (const BoundNode& b : cp.nodes) {
    if (b.control) return false;
  }
  size_t bytes = 0;
  for (const ValueInfo& v : cp.values) bytes += v.meta.nbytes();
  return bytes <= kMostBytes;
}

}  // namespace

std::shared_ptr<Job> Engine::submit(Tenant& tenant, JobSpec spec) {
  return compile_and_submit(tenant, std::move(spec), false);
}

std::shared_ptr<Job> Engine::compile_and_submit(Tenant& tenant, JobSpec spec, bool may_run_here) {
  auto w = std::make_shared<Work>();
  w->tenant = &tenant;
  std::map<std::string, TensorMeta> input_metas;
  for (const auto& [name, t] : spec.inputs) input_metas[name] = t.meta();
  auto stored_lookup = [&tenant](const std::string& n) { return tenant.store.get(n); };
  if (spec.spmd) {
    auto plan = std::make_shared<const SpmdPlan>(plan_spmd(spec, stored_lookup, ranks_->world()));
    w->spec = std::move(spec);
    w->exec = spmd_executable(std::move(plan), w->spec, nullptr);
  } else {
    // A program sent again with inputs of the same metas: compiled once
    // (CompileCache), unless its compile read a stored tensor.
    const std::string key = CompileCache::key(spec.program_sha256, input_metas);
    std::shared_ptr<const CompiledProgram> cp = compiled_.find(tenant.name, key);
    if (!cp) {
      bool read_stored = false;
      auto lookup = [&](const std::string& n) {
        read_stored = true;
        return stored_lookup(n);
      };
      cp = std::make_shared<const CompiledProgram>(compile_program(spec.program, input_metas, lookup));
      if (!read_stored && CompileCache::keepable(*cp)) compiled_.put(tenant.name, key, cp);
    }
    const bool small = is_small(*cp);
    w->exec = std::make_shared<ProgramExecutable>(std::move(cp));
    if (small) w->exec->expect_run_seconds(0);
    w->spec = std::move(spec);
  }
  return enqueue(tenant, w, may_run_here);
}

std::shared_ptr<Job> Engine::enqueue(Tenant& tenant, const std::shared_ptr<Work>& w, bool may_run_here) {
  prepare(tenant, w);
  return submit_prepared(tenant, w, may_run_here);
}

void Engine::prepare(Tenant& tenant, const std::shared_ptr<Work>& w) {
  JobSpec& spec = w->spec;

  // Which outputs come back: `return`, or every output not stored.
  auto is_output = [&](const std::string& n) {
    for (const auto& [o, id] : w->program().outputs) {
      if (o == n) return true;
    }
    return false;
  };
  std::set<std::string> targets;
  for (const auto& [name, stored_name] : spec.store) {
    validate_tensor_name(stored_name);
    if (!is_output(name)) throw Error(ErrorCode::kBadRequest, "store: '" + name + "' is not a program output");
    if (!targets.insert(stored_name).second) {
      throw Error(ErrorCode::kBadRequest, "store: tensor '" + stored_name + "' is written twice");
    }
  }
  if (spec.return_names) {
    for (const auto& r : *spec.return_names) {
      if (!is_output(r)) throw Error(ErrorCode::kBadRequest, "return: '" + r + "' is not a program output");
    }
    w->returns = *spec.return_names;
  } else {
    for (const auto& [o, id] : w->program().outputs) {
      if (!spec.store.count(o)) w->returns.push_back(o);
    }
  }
  // Each returned name once (a program may list an output twice; so may `return`).
  std::set<std::string> seen;
  std::erase_if(w->returns, [&seen](const std::string& n) { return !seen.insert(n).second; });
  const auto now = scheduler_->clock().now();
  w->deadline = spec.deadline_ms > 0 ? now + std::chrono::milliseconds(spec.deadline_ms) : Clock::time_point::max();
  w->job = std::make_shared<Job>("job-" + std::to_string(next_job_.fetch_add(1)), tenant.name, tenant.partition,
                                 spec.request_id);
}

std::shared_ptr<Job> Engine::submit_prepared(Tenant& tenant, const std::shared_ptr<Work>& w, bool may_run_here) {
  const auto deadline = w->deadline;
  const int priority = w->spec.priority;
  // Both callbacks own the job: the scheduler may drop `run` before it
  // calls `fail` (a job cancelled or expired while queued).
  std::shared_ptr<Job> job = w->job;
  engine_trace::job_queued(*job);  // before a runner can start it
  // Metrics and trace are recorded as the job ends, before its caller is
  // answered (a client reading /metrics right after its reply sees them).
  job->set_on_final([this](const Job& j) { record_end(j); });
  // Work that ran short lately runs at once on this thread when its
  // partition is idle (submit_or_run: its cores, its slot): for a tiny
  // replay the hand-offs to a runner and back cost more than the run. On
  // the CPU backend only: a device's jobs keep their runner's stream.
  const double typical = w->exec->typical_run_seconds();
  const bool here = may_run_here && cpu_only_ && typical >= 0 && typical <= kRunHereSeconds;
  uint64_t sid = 0;
  try {
    auto run = [this, w](const PartitionContext& pc) { execute(w, pc); };
    auto fail = [job](const Error& e) { job->fail(e); };
    sid = here ? scheduler_->submit_or_run(tenant.name, priority, deadline, std::move(run), std::move(fail))
               : scheduler_->submit(tenant.name, priority, deadline, std::move(run), std::move(fail));
  } catch (...) {
    job->set_on_final(nullptr);  // never queued: not a job that ran or ended
    engine_trace::job_rejected(*job);
    throw;
  }
  JobScheduler* sched = scheduler_.get();
  w->job->set_canceller([sched, sid] { return sched->cancel(sid); });
  return w->job;
}

namespace {

// The job's op launches, summed per op and committed to the metrics in one
// go: at the end, or every kOpsPerCommit nodes so a long loop shows up live.
class OpTally {
 public:
  explicit OpTally(EngineMetrics& m) : m_(m), on_(m.enabled()) {}
  void add(const std::string& op, double seconds, std::string_view ran_on) {
    if (!on_) return;
    batch_.add(op, seconds, ran_on);  // the backend whose kernel ran (a CPU fallback is "cpu")
    if (++uncommitted_ == kOpsPerCommit) flush();
  }
  void flush() {
    m_.ops_ran(batch_);
    uncommitted_ = 0;
  }

 private:
  static constexpr int kOpsPerCommit = 4096;
  EngineMetrics& m_;
  const bool on_;
  OpMetrics::Batch batch_;
  int uncommitted_ = 0;
};

}  // namespace

// Start, bind, run, sync, commit, finish; the work itself is the
// executable's (graphs/executable.h).
void Engine::execute(const std::shared_ptr<Work>& wp, const PartitionContext& pc) {
  Work& w = *wp;
  Job& job = *w.job;
  if (!job.start()) return;  // ended while queued
  running_->add(w.job, RunningJobs::Clock::now());
  const StreamPool* sp = streams_.count(pc.partition) ? streams_.at(pc.partition).get() : nullptr;
  const int stream_index = sp ? pc.runner % sp->size() : 0;
  engine_trace::job_started(job, w.spec.graph_id, stream_index);
  OpTally ops(*metrics_);
  JobResult r;
  std::optional<Error> failure;
  try {
    if (job.cancel_flag().load()) throw Error(ErrorCode::kCancelled, "job cancelled while queued");
    ExecOptions eo = bind(w, pc, sp, stream_index);
    eo.on_node = [&](const CompiledProgram& cp, const BoundNode& b, double s, std::chrono::steady_clock::time_point end,
                     std::string_view ran_on) {
      ops.add(b.op->name, s, ran_on);
      engine_trace::op_ran(w.program(), cp, b, s, end);
    };
    // The job's stream orders its memory and host copies (a device's); the
    // values below are released while it is bound.
    ThreadStreamBinding bound(sp ? backend_.get() : nullptr, eo.ctx.stream);
    const auto ran_from = std::chrono::steady_clock::now();
    ExecResult er = w.exec->run(w.spec.inputs, eo);
    w.exec->ran_for(std::chrono::duration<double>(std::chrono::steady_clock::now() - ran_from).count());
    // A device's kernels run asynchronously on the job's stream: done
    // before their results are committed, returned or read by other jobs.
    if (!devices_.empty() && devices_[0].device.type != DeviceType::kCPU) backend_->synchronize(eo.ctx.stream);
    if (w.exec->commits()) {
      r = commit(w, std::move(er));
    } else {
      r.id = job.id();
      r.partition = job.partition();
      r.backend = std::string(backend_->name());
    }
  } catch (const Error& e) {  // the executor's values were released above, before anyone is woken
    failure = e;
    // Cancelled by a drain (or anyone naming a reason): end with that error.
    if (e.code() == ErrorCode::kCancelled) {
      if (auto why = job.cancel_reason()) failure = *why;
    }
  } catch (const std::bad_alloc&) {
    failure = Error(ErrorCode::kQuotaExceeded, "out of memory");
  } catch (const std::exception& e) {
    failure = Error(ErrorCode::kInternal, e.what());
  }
  std::vector<Tensor> uncharged_inputs;
  release(w, uncharged_inputs);
  ops.flush();
  metrics_->tenant_busy(job.tenant(), job.partition(), running_->remove(job, RunningJobs::Clock::now()));
  // Ending the job records it (record_end), then wakes its caller.
  if (failure) {
    job.fail(*failure);
  } else {
    job.succeed(std::move(r));
  }
  // Nothing of the tenant's from here on: it may be gone once the job's
  // caller is woken. (uncharged_inputs, the tenant's no longer, go here.)
}

ExecOptions Engine::bind(Work& w, const PartitionContext& pc, const StreamPool* sp, int stream_index) {
  Tenant& tenant = *w.tenant;
  ExecOptions eo;
  eo.ctx.backend = backend_.get();
  eo.ctx.device = devices_.empty() ? Device{} : devices_[0].device;
  eo.ctx.account = tenant.account;
  eo.ctx.pool = pc.pool;
  if (sp) eo.ctx.stream = sp->streams()[static_cast<size_t>(stream_index)];
  eo.ctx.cancelled = &w.job->cancel_flag();
  // The scheduler's clock may be a test clock: convert its deadline to
  // steady_clock for the executor's node-boundary checks.
  if (pc.deadline != Clock::time_point::max()) {
    eo.deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                         pc.deadline - scheduler_->clock().now());
  }
  eo.stored_read = [&tenant](const std::string& n) { return tenant.store.get(n); };
  return eo;
}

JobResult Engine::commit(Work& w, ExecResult er) {
  Job& job = *w.job;
  Tenant& tenant = *w.tenant;
  // Stored outputs and in-place writes, all or nothing.
  std::vector<std::pair<std::string, Tensor>> writes = std::move(er.stored_writes);
  std::set<std::string> written;
  for (const auto& wr : writes) written.insert(wr.first);
  for (const auto& [name, stored_name] : w.spec.store) {
    if (written.count(stored_name)) {
      throw Error(ErrorCode::kBadRequest, "stored tensor '" + stored_name + "' is written twice");
    }
    for (const auto& [o, t] : er.outputs) {
      if (o == name) {
        writes.emplace_back(stored_name, t);
        break;
      }
    }
  }
  if (job.cancel_flag().load()) throw Error(ErrorCode::kCancelled, "job cancelled");
  tenant.store.commit(std::move(writes));
  // Stored tensors the job copied to the device live there from now on
  // (where they are still the same tensor): the next job reads them
  // without a copy, as a torch user keeps tensors on the GPU.
  for (auto& rl : er.relocated) tenant.store.relocate(rl.name, rl.from, std::move(rl.to));

  JobResult r;
  r.id = job.id();
  r.partition = job.partition();
  r.program_sha256 = w.spec.program_sha256;
  r.backend = std::string(backend_->name());
  r.libraries = libraries_;
  r.plan_peak_bytes = w.program().peak_bytes;
  r.spmd = er.spmd;
  for (const auto& name : w.returns) {
    for (size_t k = 0; k < er.outputs.size(); ++k) {
      if (er.outputs[k].first != name) continue;
      r.outputs.emplace_back(name, er.outputs[k].second.to_host());  // a device result is copied out
      if (r.spmd) {
        std::vector<Tensor> each;
        for (const Tensor& t : er.per_rank[k]) each.push_back(t.to_host());
        r.per_rank.push_back(std::move(each));
      }
      break;  // listed twice: returned once
    }
  }
  return r;
}

void Engine::release(Work& w, std::vector<Tensor>& uncharged_inputs) {
  // The inputs and the program's snapshots of stored tensors go, however
  // the job went: once the caller wakes, the tenant's memory shows only
  // what it keeps. Inputs charged to no one (views of the request body) go
  // to `uncharged_inputs`, released after the caller is woken: freeing a
  // large body unmaps its pages (~4 ms for a 64 MiB body on the 2-core
  // machine, bench/README.md "optim"), which is no part of the job's work
  // nor of its tenant's memory.
  for (auto& [name, t] : w.spec.inputs) {
    if (t.storage() && !t.storage()->account()) uncharged_inputs.push_back(std::move(t));
  }
  w.spec.inputs.clear();
  w.spec.body_charge.reset();  // the body's bytes are the inputs' (or were)
  w.exec.reset();
  const Tenant& tenant = *w.tenant;
  metrics_->tenant_memory(tenant.name, tenant.account->used(), tenant.account->limit());
}

std::shared_ptr<Executable> Engine::spmd_executable(std::shared_ptr<const SpmdPlan> plan, const JobSpec& spec,
                                                    std::function<ExecResult(size_t, const ExecOptions&)> member) {
  SpmdSite site;
  site.workers = ranks_.get();
  site.peers = peers_;
  site.places = rank_places_;
  site.keys = keys_.get();
  site.on_collective_timeout = on_collective_timeout_;
  return std::make_shared<SpmdExecutable>(std::move(plan), spec, std::move(site), std::move(member));
}

void Engine::record_end(const Job& job) {
  if (log::enabled(log::Level::kInfo)) {
    auto err = job.error();
    log::info("job", {{"job", job.id()},
                      {"request_id", job.request_id()},
                      {"tenant", job.tenant()},
                      {"partition", job.partition()},
                      {"state", job_state_name(job.state())},
                      {"queue_ms", job.queue_ms()},
                      {"run_ms", job.run_ms()},
                      {"error", err ? std::string(error_code_name(err->code())) : std::string()}});
  }
  if (metrics_->enabled()) {  // --metrics off: one check per job
    record_device_memory();
    metrics_->job_finished(job.tenant(), job.partition(), std::string(job_state_name(job.state())),
                           job.queue_ms() / 1e3, job.run_ms() / 1e3);
  }
  engine_trace::job_ended(job);
}

JobResult Engine::result_of(Job& job) {
  return *shared_result_of(job);
}

std::shared_ptr<const JobResult> Engine::shared_result_of(Job& job) {
  if (job.state() != JobState::kSucceeded) throw *job.error();
  return job.take_result();  // with the job's queue_ms and run_ms (Job::succeed)
}

std::shared_ptr<Job> Engine::run_async(Tenant& tenant, JobSpec spec, std::function<void(Job&)> done) {
  std::shared_ptr<Job> job = compile_and_submit(tenant, std::move(spec), true);
  Job* j = job.get();  // the callback is the job's own: it cannot outlive it
  job->on_end([j, done = std::move(done)] { done(*j); });
  return job;
}

void Engine::record_tenant_memory(const Tenant& tenant) {
  metrics_->tenant_memory(tenant.name, tenant.account->used(), tenant.account->limit());
}

void Engine::set_spmd_peers(std::shared_ptr<SpmdPeers> peers) {
  peers_ = std::move(peers);
}

}  // namespace tensord
