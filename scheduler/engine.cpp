#include "scheduler/engine.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <set>

#include "graphs/compiled_program.h"
#include "graphs/executor.h"
#include "graphs/graph_pool.h"
#include "graphs/graph_store.h"
#include "graphs/replay_plan.h"
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
#include "scheduler/spmd_run.h"
#include "scheduler/engine_work.h"
#include "streams/stream_pool.h"

namespace tensord {

Engine::Engine(std::unique_ptr<Backend> backend, const ServerConfig& config, const EngineOptions& opts)
    : backend_(std::move(backend)), config_(config) {
  validate_config(config_);
  devices_ = backend_->devices();  // fixed for the process; asking reads /proc
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
  libraries_ = backend_->libraries();
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
  // Keys of this server's groups in a shared store must not meet those of
  // an earlier run of it (a Redis store outlives the process).
  boot_id_ =
      std::random_device{}() ^ static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
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

std::shared_ptr<Job> Engine::submit(Tenant& tenant, JobSpec spec) {
  auto w = std::make_shared<Work>();
  w->tenant = &tenant;
  std::map<std::string, TensorMeta> input_metas;
  for (const auto& [name, t] : spec.inputs) input_metas[name] = t.meta();
  auto stored_lookup = [&tenant](const std::string& n) { return tenant.store.get(n); };
  if (spec.spmd) {
    w->spmd = std::make_shared<const SpmdPlan>(plan_spmd(spec, stored_lookup, ranks_->world()));
  } else {
    w->cp = compile_program(spec.program, input_metas, stored_lookup);
  }
  w->spec = std::move(spec);
  return enqueue(tenant, w);
}

std::shared_ptr<Job> Engine::enqueue(Tenant& tenant, const std::shared_ptr<Work>& w) {
  prepare(tenant, w);
  return submit_prepared(tenant, w);
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

std::shared_ptr<Job> Engine::submit_prepared(Tenant& tenant, const std::shared_ptr<Work>& w) {
  const auto deadline = w->deadline;
  const int priority = w->spec.priority;
  // Both callbacks own the job: the scheduler may drop `run` before it
  // calls `fail` (a job cancelled or expired while queued).
  std::shared_ptr<Job> job = w->job;
  engine_trace::job_queued(*job);  // before a runner can start it
  // Metrics and trace are recorded as the job ends, before its caller is
  // answered (a client reading /metrics right after its reply sees them).
  job->set_on_final([this](const Job& j) { record_end(j); });
  uint64_t sid = 0;
  try {
    sid = scheduler_->submit(
        tenant.name, priority, deadline, [this, w](const PartitionContext& pc) { execute(w, pc); },
        [job](const Error& e) { job->fail(e); });
  } catch (...) {
    job->set_on_final(nullptr);  // never queued: not a job that ran or ended
    engine_trace::job_rejected(*job);
    throw;
  }
  JobScheduler* sched = scheduler_.get();
  w->job->set_canceller([sched, sid] { return sched->cancel(sid); });
  return w->job;
}

void Engine::execute(const std::shared_ptr<Work>& wp, const PartitionContext& pc) {
  Work& w = *wp;
  Job& job = *w.job;
  Tenant& tenant = *w.tenant;
  if (!job.start()) return;  // ended while queued
  running_->add(w.job, RunningJobs::Clock::now());
  const StreamPool* sp = streams_.count(pc.partition) ? streams_.at(pc.partition).get() : nullptr;
  const int stream_index = sp ? pc.runner % sp->size() : 0;
  engine_trace::job_started(job, w.spec.graph_id, stream_index);
  // The job's op launches, summed per op and committed in one go (at the
  // end, or every kOpsPerCommit nodes so a long loop shows up live).
  constexpr int kOpsPerCommit = 4096;
  OpMetrics::Batch ops;
  int uncommitted = 0;
  const bool op_metrics = metrics_->enabled();
  JobResult r;
  std::optional<Error> failure;
  try {
    if (job.cancel_flag().load()) throw Error(ErrorCode::kCancelled, "job cancelled while queued");
    {
      ExecOptions eo;
      eo.ctx.backend = backend_.get();
      eo.ctx.device = devices_.empty() ? Device{} : devices_[0].device;
      eo.ctx.account = tenant.account;
      eo.ctx.pool = pc.pool;
      if (sp) eo.ctx.stream = sp->streams()[static_cast<size_t>(stream_index)];
      eo.ctx.cancelled = &job.cancel_flag();
      eo.cancelled = &job.cancel_flag();
      // The scheduler's clock may be a test clock: convert its deadline to
      // steady_clock for the executor's node-boundary checks.
      if (pc.deadline != Clock::time_point::max()) {
        eo.deadline =
            std::chrono::steady_clock::now() +
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(pc.deadline - scheduler_->clock().now());
      }
      eo.stored_read = [&tenant](const std::string& n) { return tenant.store.get(n); };
      eo.on_node = [&](const CompiledProgram& cp, const BoundNode& b, double s,
                       std::chrono::steady_clock::time_point end, std::string_view ran_on) {
        if (op_metrics) {
          ops.add(b.op->name, s, ran_on);  // the backend whose kernel ran (a CPU fallback is "cpu")
          if (++uncommitted == kOpsPerCommit) {
            metrics_->ops_ran(ops);
            uncommitted = 0;
          }
        }
        engine_trace::op_ran(w.program(), cp, b, s, end);
      };
      // The job's stream orders its memory and host copies (a device's); the
      // values below are released while it is bound.
      ThreadStreamBinding bound(sp ? backend_.get() : nullptr, eo.ctx.stream);
      if (w.task) {
        w.task(eo);
        if (!devices_.empty() && devices_[0].device.type != DeviceType::kCPU) backend_->synchronize(eo.ctx.stream);
        r.id = job.id();
        r.partition = job.partition();
        r.backend = std::string(backend_->name());
      } else {
        ExecResult er;
        std::vector<ExecResult> members;  // an SPMD job's, in its group's order
        std::vector<size_t> shown;        // its members whose values this server answers with
        if (w.spmd) {
          static const SpmdRequest kGraphReplay;  // a replay of an SPMD graph may say no "ranks"
          const SpmdRequest& sr = w.spec.spmd ? *w.spec.spmd : kGraphReplay;
          SpmdRun run;
          run.plan = w.spmd.get();
          run.spec = &w.spec;
          run.peers = peers_;
          run.part = sr.part_members;
          run.key = sr.part_key.empty() ? spmd_key(w.spmd->group, false) : sr.part_key;
          run.places = rank_places_;
          if (w.spmd_graph) {
            // Each member's replay plan on its rank (its own pool: the ranks
            // run at once; the first member's gate admits one replay).
            run.run_member = [&w](size_t i, const ExecOptions& o) {
              const GraphMember& m = w.spmd_graph->members[i];
              std::lock_guard<std::mutex> lk(m.pool->run_mutex());
              // Captured on the rank's GPU, collectives included; else the executor.
              if (m.device_graph) return m.device_graph->run(w.spmd->inputs[i], o);
              return m.plan->run(w.spmd->inputs[i], o);
            };
          }
          std::vector<bool> ran;
          try {
            members = run_spmd(run, *ranks_, eo, job.cancel_flag(), ran);
          } catch (const Error& e) {
            if (sr.part_key.empty()) spmd_key(w.spmd->group, true);  // the next job meets in a fresh group
            if (e.code() == ErrorCode::kDeadlineExceeded && on_collective_timeout_) on_collective_timeout_();
            throw;
          } catch (...) {
            if (sr.part_key.empty()) spmd_key(w.spmd->group, true);
            throw;
          }
          // Stored writes are replicated (plan_spmd checked): each server
          // commits those of its first member to its own store.
          size_t first = 0;
          while (first < ran.size() && !(ran[first] && ranks_->is_local(w.spmd->ranks[first]))) ++first;
          if (first == ran.size()) throw Error(ErrorCode::kInternal, "no member of the group ran on this server");
          er = members[first];
          if (!rank_places_.empty() &&
              rank_places_.at(static_cast<size_t>(w.spmd->ranks[first] - ranks_->offset())).device != eo.ctx.device) {
            // That member ran on another GPU than the tenant's store lives on:
            // its stored writes move to the store's device, and the stored
            // tensors it copied to its GPU stay where they were.
            for (auto& [name, t] : er.stored_writes) t = t.to_device(backend_.get(), eo.ctx.device, tenant.account);
            er.relocated.clear();
          }
          for (size_t i = 0; i < ran.size(); ++i) {
            if (sr.part_members.empty()
                    ? ran[i]
                    : std::find(sr.part_members.begin(), sr.part_members.end(), i) != sr.part_members.end()) {
              shown.push_back(i);
            }
          }
        } else if (w.plan) {
          // Graphs sharing a pool share its buffers: one replay at a time.
          std::lock_guard<std::mutex> lk(w.pool->run_mutex());
          er = w.plan->run(w.spec.inputs, eo);
        } else {
          er = execute_program(w.program(), w.spec.inputs, eo);
        }
        // A device's kernels run asynchronously on the job's stream: done
        // before their results are committed, returned or read by other jobs.
        if (!devices_.empty() && devices_[0].device.type != DeviceType::kCPU) backend_->synchronize(eo.ctx.stream);

        // Commit: stored outputs and in-place writes, all or nothing.
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

        r.id = job.id();
        r.partition = job.partition();
        r.program_sha256 = w.spec.program_sha256;
        r.backend = std::string(backend_->name());
        r.libraries = libraries_;
        r.plan_peak_bytes = w.program().peak_bytes;
        r.spmd = w.spmd != nullptr;
        for (const auto& name : w.returns) {
          for (size_t k = 0; k < er.outputs.size(); ++k) {
            if (er.outputs[k].first != name) continue;
            r.outputs.emplace_back(name, er.outputs[k].second.to_host());  // a device result is copied out
            if (r.spmd) {
              std::vector<Tensor> each;
              if (!w.spmd->is_replicated_output(name)) {
                for (size_t i : shown) each.push_back(members[i].outputs[k].second.to_host());
              }
              r.per_rank.push_back(std::move(each));
            }
            break;  // listed twice: returned once
          }
        }
      }
    }  // the executor's values are released here, before anyone is woken
  } catch (const Error& e) {
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
  // So are the inputs and the program's snapshots of stored tensors, however
  // the job went: once the caller wakes, the tenant's memory shows only what
  // it keeps. Inputs charged to no one (views of the request body) are
  // released after the caller is woken: freeing a large body unmaps its
  // pages (~4 ms for a 64 MiB body on the 2-core machine, bench/README.md
  // "optim"), which is no part of the job's work nor of its tenant's memory.
  std::vector<Tensor> uncharged_inputs;
  for (auto& [name, t] : w.spec.inputs) {
    if (t.storage() && !t.storage()->account()) uncharged_inputs.push_back(std::move(t));
  }
  w.spec.inputs.clear();
  w.spec.body_charge.reset();  // the body's bytes are the inputs' (or were)
  w.cp = CompiledProgram{};
  w.shared_cp.reset();
  w.plan.reset();
  w.spmd.reset();
  w.spmd_graph.reset();
  w.task = nullptr;
  metrics_->tenant_memory(tenant.name, tenant.account->used(), tenant.account->limit());
  metrics_->ops_ran(ops);
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
  if (job.state() != JobState::kSucceeded) throw *job.error();
  JobResult r = *job.take_result();
  r.queue_ms = job.queue_ms();
  r.run_ms = job.run_ms();
  return r;
}

std::shared_ptr<Job> Engine::run_async(Tenant& tenant, JobSpec spec, std::function<void(Job&)> done) {
  std::shared_ptr<Job> job = submit(tenant, std::move(spec));
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

std::string Engine::spmd_key(const std::string& group, bool replace) {
  std::lock_guard lk(key_mu_);
  uint64_t& gen = key_gen_[group];
  if (replace) ++gen;
  return group + "#" + std::to_string(boot_id_) + "." + std::to_string(gen);
}

}  // namespace tensord
