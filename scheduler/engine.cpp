#include "scheduler/engine.h"

#include <chrono>
#include <set>

#include "graphs/compiled_program.h"
#include "graphs/executor.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/error.h"
#include "scheduler/engine_metrics.h"

namespace tensord {

struct Engine::Work {
  std::shared_ptr<Job> job;
  Tenant* tenant = nullptr;
  JobSpec spec;
  CompiledProgram cp;
  std::vector<std::string> returns;
  std::chrono::steady_clock::time_point deadline;
};

Engine::Engine(std::unique_ptr<Backend> backend, EngineOptions opts)
    : backend_(std::move(backend)), opts_(std::move(opts)) {
  if (auto* cpu = dynamic_cast<CpuBackend*>(backend_.get())) pool_ = &cpu->pool();
  metrics_ = std::make_unique<EngineMetrics>(std::string(backend_->name()));
  if (opts_.workqueue_limit < 1) opts_.workqueue_limit = 1;
  metrics_->inflight(opts_.partition, 0, opts_.workqueue_limit);
  for (int i = 0; i < opts_.workqueue_limit; ++i) workers_.emplace_back([this] { worker_loop(); });
}

Engine::~Engine() {
  shutdown();
  for (auto& w : workers_) w.join();
}

void Engine::shutdown() {
  std::deque<std::shared_ptr<Work>> dropped;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) return;
    stop_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  for (auto& w : dropped) w->job->fail(Error(ErrorCode::kUnavailable, "server is shutting down"));
}

void Engine::worker_loop() {
  for (;;) {
    std::shared_ptr<Work> w;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      w = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
      metrics_->inflight(opts_.partition, running_, opts_.workqueue_limit);
    }
    execute(*w);
    {
      std::lock_guard<std::mutex> lk(mu_);
      --running_;
      metrics_->inflight(opts_.partition, running_, opts_.workqueue_limit);
    }
  }
}

std::shared_ptr<Job> Engine::submit(Tenant& tenant, JobSpec spec) {
  auto w = std::make_shared<Work>();
  w->tenant = &tenant;
  const auto now = std::chrono::steady_clock::now();
  w->deadline = spec.deadline_ms > 0 ? now + std::chrono::milliseconds(spec.deadline_ms)
                                     : std::chrono::steady_clock::time_point::max();
  std::map<std::string, TensorMeta> input_metas;
  for (const auto& [name, t] : spec.inputs) input_metas[name] = t.meta();
  auto stored_lookup = [&tenant](const std::string& n) { return tenant.store.get(n); };
  w->cp = compile_program(spec.program, input_metas, stored_lookup);

  // Which outputs come back: `return`, or every output not stored.
  auto is_output = [&](const std::string& n) {
    for (const auto& [o, id] : w->cp.outputs) {
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
    for (const auto& [o, id] : w->cp.outputs) {
      if (!spec.store.count(o)) w->returns.push_back(o);
    }
  }
  w->spec = std::move(spec);
  w->job = std::make_shared<Job>("job-" + std::to_string(next_job_.fetch_add(1)), tenant.name, opts_.partition);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) throw Error(ErrorCode::kUnavailable, "server is shutting down");
    queue_.push_back(w);
    metrics_->queue_depth(tenant.name, opts_.partition, static_cast<int64_t>(queue_.size()));
  }
  cv_.notify_one();
  return w->job;
}

void Engine::execute(Work& w) {
  Job& job = *w.job;
  Tenant& tenant = *w.tenant;
  if (!job.start()) return;  // cancelled while queued
  try {
    if (job.cancel_flag().load()) throw Error(ErrorCode::kCancelled, "job cancelled while queued");
    if (std::chrono::steady_clock::now() > w.deadline) {
      throw Error(ErrorCode::kDeadlineExceeded, "deadline exceeded while queued");
    }
    ExecOptions eo;
    eo.ctx.backend = backend_.get();
    eo.ctx.device = backend_->devices().empty() ? Device{} : backend_->devices()[0].device;
    eo.ctx.account = tenant.account;
    eo.ctx.pool = pool_;
    eo.ctx.cancelled = &job.cancel_flag();
    eo.cancelled = &job.cancel_flag();
    eo.deadline = w.deadline;
    eo.stored_read = [&tenant](const std::string& n) { return tenant.store.get(n); };
    eo.on_node = [this](const BoundNode& b, double s) { metrics_->op_ran(b.op->name, s); };
    ExecResult er = execute_program(w.cp, w.spec.inputs, eo);

    // Commit: stored outputs and in-place writes, all or nothing.
    std::vector<std::pair<std::string, Tensor>> writes = std::move(er.stored_writes);
    std::set<std::string> written;
    for (const auto& wr : writes) written.insert(wr.first);
    for (const auto& [name, stored_name] : w.spec.store) {
      if (written.count(stored_name)) {
        throw Error(ErrorCode::kBadRequest, "stored tensor '" + stored_name + "' is written twice");
      }
      for (const auto& [o, t] : er.outputs) {
        if (o == name) writes.emplace_back(stored_name, t);
      }
    }
    if (job.cancel_flag().load()) throw Error(ErrorCode::kCancelled, "job cancelled");
    tenant.store.commit(std::move(writes));

    JobResult r;
    r.id = job.id();
    r.partition = job.partition();
    r.program_sha256 = w.spec.program_sha256;
    r.backend = std::string(backend_->name());
    r.libraries = backend_->libraries();
    r.plan_peak_bytes = w.cp.peak_bytes;
    for (const auto& name : w.returns) {
      for (const auto& [o, t] : er.outputs) {
        if (o == name) r.outputs.emplace_back(o, t);
      }
    }
    w.spec.inputs.clear();  // release request memory before the result waits to be fetched
    job.succeed(std::move(r));
  } catch (const Error& e) {
    job.fail(e);
  } catch (const std::bad_alloc&) {
    job.fail(Error(ErrorCode::kQuotaExceeded, "out of memory"));
  } catch (const std::exception& e) {
    job.fail(Error(ErrorCode::kInternal, e.what()));
  }
  metrics_->tenant_memory(tenant.name, tenant.account->used(), tenant.account->limit());
  std::string state(job_state_name(job.state()));
  metrics_->job_finished(tenant.name, job.partition(), state, job.queue_ms() / 1e3, job.run_ms() / 1e3);
}

JobResult Engine::run(Tenant& tenant, JobSpec spec, const std::atomic<bool>* cancel_when) {
  std::shared_ptr<Job> job = submit(tenant, std::move(spec));
  if (cancel_when) {
    while (!job->wait_for(std::chrono::milliseconds(20))) {
      if (cancel_when->load()) job->cancel("the client closed the connection");
    }
  }
  JobState s = job->wait();
  if (s != JobState::kSucceeded) throw *job->error();
  JobResult r = *job->result();
  r.queue_ms = job->queue_ms();
  r.run_ms = job->run_ms();
  return r;
}

}  // namespace tensord
