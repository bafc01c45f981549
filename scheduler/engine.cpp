#include "scheduler/engine.h"

#include <chrono>
#include <future>
#include <set>

#include "graphs/compiled_program.h"
#include "graphs/executor.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/error.h"
#include "scheduler/engine_metrics.h"

namespace tensord {

namespace {
double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

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
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) return;
    stop_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  for (auto& f : dropped) f();  // each task sees stop_ and fails with unavailable
}

void Engine::worker_loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

JobResult Engine::run(Tenant& tenant, JobSpec spec, const std::atomic<bool>* cancelled) {
  using clock = std::chrono::steady_clock;
  const auto t_submit = clock::now();
  const auto deadline =
      spec.deadline_ms > 0 ? t_submit + std::chrono::milliseconds(spec.deadline_ms) : clock::time_point::max();
  // Validation, binding, shape inference and planning happen on the caller's
  // thread before queueing: a bad program never takes a worker.
  std::map<std::string, TensorMeta> input_metas;
  for (const auto& [name, t] : spec.inputs) input_metas[name] = t.meta();
  auto stored_lookup = [&tenant](const std::string& n) { return tenant.store.get(n); };
  CompiledProgram cp = compile_program(spec.program, input_metas, stored_lookup);

  // Which outputs come back: `return` or every output not stored.
  std::vector<std::string> ret;
  for (const auto& [name, stored_name] : spec.store) {
    validate_tensor_name(stored_name);
    bool found = false;
    for (const auto& [o, id] : cp.outputs) found |= (o == name);
    if (!found) throw Error(ErrorCode::kBadRequest, "store: '" + name + "' is not a program output");
  }
  if (spec.return_names) {
    for (const auto& r : *spec.return_names) {
      bool found = false;
      for (const auto& [o, id] : cp.outputs) found |= (o == r);
      if (!found) throw Error(ErrorCode::kBadRequest, "return: '" + r + "' is not a program output");
    }
    ret = *spec.return_names;
  } else {
    for (const auto& [o, id] : cp.outputs) {
      if (!spec.store.count(o)) ret.push_back(o);
    }
  }

  JobResult result;
  result.id = "job-" + std::to_string(next_job_.fetch_add(1));
  result.partition = opts_.partition;
  result.program_sha256 = spec.program_sha256;
  result.backend = std::string(backend_->name());
  result.libraries = backend_->libraries();
  result.plan_peak_bytes = cp.peak_bytes;

  std::promise<ExecResult> done;
  auto fut = done.get_future();
  clock::time_point t_start{}, t_end{};
  auto task = [&] {
    t_start = clock::now();
    try {
      bool stopping;
      {
        std::lock_guard<std::mutex> lk(mu_);
        stopping = stop_;
      }
      if (stopping) throw Error(ErrorCode::kUnavailable, "server is shutting down");
      if (cancelled && cancelled->load()) throw Error(ErrorCode::kCancelled, "job cancelled while queued");
      if (t_start > deadline) throw Error(ErrorCode::kDeadlineExceeded, "deadline exceeded while queued");
      ExecOptions eo;
      eo.ctx.backend = backend_.get();
      eo.ctx.device = backend_->devices().empty() ? Device{} : backend_->devices()[0].device;
      eo.ctx.account = tenant.account;
      eo.ctx.pool = pool_;
      eo.ctx.cancelled = cancelled;
      eo.cancelled = cancelled;
      eo.deadline = deadline;
      eo.stored_read = [&tenant](const std::string& n) { return tenant.store.get(n); };
      eo.on_node = [this](const BoundNode& b, double s) { metrics_->op_ran(b.op->name, s); };
      ExecResult r = execute_program(cp, spec.inputs, eo);
      t_end = clock::now();
      done.set_value(std::move(r));
    } catch (...) {
      t_end = clock::now();
      done.set_exception(std::current_exception());
    }
  };
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) throw Error(ErrorCode::kUnavailable, "server is shutting down");
    queue_.emplace_back(task);
    metrics_->queue_depth(tenant.name, opts_.partition, static_cast<int64_t>(queue_.size()));
  }
  cv_.notify_one();

  ExecResult er;
  try {
    er = fut.get();
  } catch (const Error& e) {
    std::string state = e.code() == ErrorCode::kCancelled ? "cancelled" : "failed";
    metrics_->job_finished(tenant.name, opts_.partition, state, ms_between(t_submit, t_start) / 1e3,
                           ms_between(t_start, t_end) / 1e3);
    throw;
  }
  result.queue_ms = ms_between(t_submit, t_start);
  result.run_ms = ms_between(t_start, t_end);

  // Commit: stored outputs and in-place writes, all or nothing.
  std::vector<std::pair<std::string, Tensor>> writes = std::move(er.stored_writes);
  for (const auto& [name, stored_name] : spec.store) {
    for (const auto& [o, t] : er.outputs) {
      if (o == name) writes.emplace_back(stored_name, t);
    }
  }
  std::set<std::string> seen;
  for (const auto& w : writes) {
    if (!seen.insert(w.first).second)
      throw Error(ErrorCode::kBadRequest, "stored tensor '" + w.first + "' is written twice");
  }
  tenant.store.commit(std::move(writes));
  metrics_->tenant_memory(tenant.name, tenant.account->used(), tenant.account->limit());
  metrics_->job_finished(tenant.name, opts_.partition, "succeeded", result.queue_ms / 1e3, result.run_ms / 1e3);

  for (const auto& r : ret) {
    for (const auto& [o, t] : er.outputs) {
      if (o == r) result.outputs.emplace_back(o, t);
    }
  }
  return result;
}

}  // namespace tensord
