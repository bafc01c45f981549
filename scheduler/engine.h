// The engine: compiles a job's program against the tenant's stored tensors,
// runs it on one of the partition's job workers (at most `workqueue_limit`
// at once), and commits stored writes only when every node succeeded.
// Thread-safe; run() blocks the caller until the job ends.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ops/backend.h"
#include "scheduler/job.h"
#include "scheduler/tenant.h"

namespace tensord {

class ThreadPool;
class EngineMetrics;

struct EngineOptions {
  int workqueue_limit = 2;  // jobs running at once on the default partition
  std::string partition = "default";
};

class Engine {
 public:
  Engine(std::unique_ptr<Backend> backend, EngineOptions opts);
  ~Engine();

  // Validates, plans and runs a job; throws tensord::Error on any failure
  // (nothing committed). `cancelled` may be set by another thread.
  JobResult run(Tenant& tenant, JobSpec spec, const std::atomic<bool>* cancelled = nullptr);

  Backend& backend() { return *backend_; }
  const EngineOptions& options() const { return opts_; }
  // Cancels queued jobs and makes new ones fail with unavailable (draining).
  void shutdown();

 private:
  void worker_loop();

  std::unique_ptr<Backend> backend_;
  EngineOptions opts_;
  ThreadPool* pool_ = nullptr;  // the CPU backend's pool, if any
  std::unique_ptr<EngineMetrics> metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
  std::atomic<int64_t> next_job_{1};
};

}  // namespace tensord
