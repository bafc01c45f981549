// The engine: compiles a job's program against the tenant's stored tensors
// (on the caller's thread: a bad program never takes a worker), queues it on
// the tenant's partition, runs it on a partition worker, and commits stored
// writes only when every node succeeded. Thread-safe.
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
#include "scheduler/job_handle.h"
#include "scheduler/tenant.h"

namespace tensord {

class ThreadPool;
class EngineMetrics;
struct CompiledProgram;

struct EngineOptions {
  int workqueue_limit = 2;  // jobs running at once on the default partition
  std::string partition = "default";
};

class Engine {
 public:
  Engine(std::unique_ptr<Backend> backend, EngineOptions opts);
  ~Engine();

  // Validates and plans now (throws tensord::Error, nothing queued), then
  // queues the job and returns at once.
  std::shared_ptr<Job> submit(Tenant& tenant, JobSpec spec);
  // submit + wait; rethrows the job's error. The job is cancelled when
  // `*cancel_when` becomes true (a client that went away): a queued job at
  // once, a running one at its next node boundary.
  JobResult run(Tenant& tenant, JobSpec spec, const std::atomic<bool>* cancel_when = nullptr);

  Backend& backend() { return *backend_; }
  const EngineOptions& options() const { return opts_; }
  // Fails queued jobs with unavailable and refuses new ones (draining).
  void shutdown();

 private:
  struct Work;
  void worker_loop();
  void execute(Work& w);

  std::unique_ptr<Backend> backend_;
  EngineOptions opts_;
  ThreadPool* pool_ = nullptr;  // the CPU backend's pool, if any
  std::unique_ptr<EngineMetrics> metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Work>> queue_;
  bool stop_ = false;
  int running_ = 0;
  std::vector<std::thread> workers_;
  std::atomic<int64_t> next_job_{1};
};

}  // namespace tensord
