// The engine: compiles a job's program against the tenant's stored tensors
// (on the caller's thread: a bad program never takes a worker), queues it on
// the tenant's partition through the JobScheduler (weighted fair queueing,
// workqueue limits), runs it on a partition runner with the partition's
// compute pool, and commits stored writes only when every node succeeded.
// Thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <chrono>
#include <condition_variable>
#include <map>
#include <thread>
#include <vector>
#include <memory>
#include <mutex>
#include <string>

#include "ops/backend.h"
#include "ops/dist/group_factory.h"
#include "scheduler/clock.h"
#include "scheduler/compile_cache.h"
#include "scheduler/config.h"
#include "scheduler/job_spec.h"
#include "scheduler/job.h"
#include "scheduler/scheduler_types.h"
#include "scheduler/tenant.h"

namespace gloo::rendezvous {
class Store;
}

namespace tensord {

class EngineMetrics;
class JobScheduler;
class StreamPool;
struct CompiledProgram;
class GraphPool;
class ReplayPlan;
class RunningJobs;
class RankWorkers;
class CollectiveMetrics;
class SpmdPeers;
struct SpmdGraph;
struct SpmdPlan;
struct ExecOptions;
struct ExecResult;
struct RankPlace;
class Executable;
class SpmdKeys;

struct EngineOptions {
  std::shared_ptr<Clock> clock = std::make_shared<SteadyClock>();
  int cores = 0;        // cores to split among partitions; 0: all
  bool metrics = true;  // false (--metrics off): job and op metrics are not recorded
  // SPMD (API.md 8): the local ranks (--ranks), each collective's timeout
  // (--collective-timeout) and each rank's flight recorder size
  // (--flight-recorder-entries).
  int ranks = 1;
  std::chrono::milliseconds collective_timeout{60000};
  size_t flight_recorder_entries = 2048;
  // A world across servers (--world-size, --rank-offset, --rendezvous):
  // see RankWorkersOptions.
  int world_size = 0;
  int rank_offset = 0;
  std::function<std::shared_ptr<gloo::rendezvous::Store>()> make_store;
  std::string rank_hostname = "127.0.0.1";
  // Called when an SPMD job fails on a collective that timed out (the
  // server writes the flight recorders to its state dir).
  std::function<void()> on_collective_timeout;
  // The ranks' groups when not Gloo's (the server: NCCL on the CUDA
  // backend, ops/dist/nccl/nccl_process_group.h). On the CUDA backend, local
  // rank r runs its program on GPU r either way (--ranks must not exceed
  // the visible GPUs: the constructor throws invalid_argument).
  dist::GroupFactory rank_groups;
};

class Engine {
 public:
  Engine(std::unique_ptr<Backend> backend, const ServerConfig& config, const EngineOptions& opts = {});
  ~Engine();

  // Validates and plans now (throws tensord::Error, nothing queued), then
  // queues the job and returns at once: the job is never run on the
  // caller's thread (POST /v1/jobs answers "queued" right after). A full
  // queue throws 429 queue_full carrying a Retry-After estimate.
  std::shared_ptr<Job> submit(Tenant& tenant, JobSpec spec);
  // The asynchronous forms (an HTTP request answered from the job's end,
  // without a thread waiting on it): submit, then `done(job)` once the job
  // has ended, on the thread that ended it (Job::on_end). A refused job
  // throws as submit() does and `done` is never called.
  std::shared_ptr<Job> run_async(Tenant& tenant, JobSpec spec, std::function<void(Job&)> done);
  // A captured graph's replay plan (graphs/replay_plan.h): no validation,
  // binding or planning; spec.program is ignored and spec.inputs must match
  // the program's input metas (409 conflict). Replays of graphs sharing a
  // pool run one at a time: the pool's gate admits one to the queue, and
  // the next when it ends, so a waiting replay holds no runner. Refused at
  // once (nothing queued, `done` not called) only when admitted at once.
  std::shared_ptr<Job> replay_async(Tenant& tenant, std::shared_ptr<ReplayPlan> plan, std::shared_ptr<GraphPool> pool,
                                    JobSpec spec, std::function<void(Job&)> done);
  // A replay of a graph captured with "ranks" (API.md 8): the request's
  // inputs (replicated, per_rank, shard) split over the graph's group and
  // checked against each member's captured shapes (409 naming the rank),
  // then each member's replay plan runs on its rank as an SPMD job does
  // (one SPMD job at a time; the first member's pool gate admits one replay
  // of the graph at a time).
  std::shared_ptr<Job> replay_spmd_async(Tenant& tenant, std::shared_ptr<const SpmdGraph> graph, JobSpec spec,
                                         std::function<void(Job&)> done);
  // Work that is not a program (a graph's capture: compile, allocate, bind)
  // as a job on the tenant's partition: queued behind the tenant's other
  // jobs, cancellable while queued, counted, traced and logged like any
  // job. `task` runs on a partition runner with the partition's execution
  // context (backend, device, stream, the tenant's memory account); what it
  // throws fails the job. `done` as for run_async.
  std::shared_ptr<Job> run_task_async(Tenant& tenant, const std::string& request_id,
                                      std::function<void(const ExecOptions&)> task, std::function<void(Job&)> done);
  // Runs part(i, opts) for every member i of the group over `ranks` (all
  // of them this server's) on its rank's thread, with the rank's group,
  // device and stream in opts.ctx, as an SPMD job's members run (one SPMD
  // run at a time): a graph's capture on its ranks (GraphService).
  // `base`: the caller's options (cancel flag, deadline). A failure on any
  // rank stops the others at their next collective wait and throws the
  // first real error; the group meets in a fresh generation afterwards, as
  // after a failed job.
  void run_on_ranks(const std::vector<int>& ranks, const std::string& group, const ExecOptions& base,
                    const std::function<void(size_t member, const ExecOptions& opts)>& part);
  // Whether local ranks run on devices of their own (the CUDA backend).
  bool ranks_on_devices() const { return !rank_places_.empty(); }
  // A job that ended: its result, with its queue and run times, moved out;
  // or its error thrown.
  static JobResult result_of(Job& job);
  // The same without a copy: the job's own result, handed over.
  static std::shared_ptr<const JobResult> shared_result_of(Job& job);

  // Refreshes the tenant's memory gauge (after memory held outside jobs
  // changed, e.g. a captured graph was deleted; the server also refreshes
  // every tenant's before each scrape).
  void record_tenant_memory(const Tenant& tenant);
  // Refreshes tensord_device_memory_bytes.
  void record_device_memory();
  // A graph captured (+1) or deleted (-1): tensord_graph_captures_total and
  // tensord_graphs gauge.
  void record_graph_capture(const Tenant& tenant, int live_graphs_delta);
  Backend& backend() { return *backend_; }
  // This server's local ranks (their flight recorders); never null.
  RankWorkers& ranks() { return *ranks_; }
  // How SPMD jobs reach the world's other servers (set once, before the
  // server serves; none: every rank is local).
  void set_spmd_peers(std::shared_ptr<SpmdPeers> peers);
  const std::vector<DeviceInfo>& devices() const { return devices_; }
  // The config in force (a copy: a reload may replace it).
  ServerConfig config() const;
  // Applies a reload's effective config (plan_reload): workqueue limits and
  // the tenants' scheduling settings; queued and running jobs are kept.
  // Throws Error before changing anything when it does not fit the running
  // partitions.
  void reload(const ServerConfig& config);
  SchedulerStats stats() const;
  // The CPU ids a partition's threads are pinned to (fixed at start); empty
  // for an unknown partition.
  std::vector<int> partition_cpus(const std::string& partition) const;
  // Draining starts: refuses new jobs and fails queued ones with 503
  // unavailable; running jobs go on. Never blocks. Idempotent.
  void begin_drain();
  // Asks every running job to stop at its next node boundary, ending with
  // `why` (a drain past its timeout: 503 unavailable); returns how many.
  size_t cancel_running(const Error& why);
  // Jobs running now.
  size_t running_jobs() const;
  // begin_drain(), then waits for running jobs and joins the engine's
  // threads. Idempotent.
  void shutdown();

  // The compiled /v1/run programs kept for their next run (tests: hits).
  const CompileCache& compile_cache() const { return compiled_; }

 private:
  struct Work;
  void execute(const std::shared_ptr<Work>& w, const PartitionContext& pc);
  // execute's steps: the job's options on its runner; the commit of a run
  // that succeeded (stored writes all or nothing, the answer's outputs);
  // what the job held, released before its caller is woken.
  ExecOptions bind(Work& w, const PartitionContext& pc, const StreamPool* sp, int stream_index);
  JobResult commit(Work& w, ExecResult er);
  void release(Work& w, std::vector<Tensor>& uncharged_inputs);
  // An SPMD job's executable over `plan` (`spec`: the job's, in its Work).
  std::shared_ptr<Executable> spmd_executable(std::shared_ptr<const SpmdPlan> plan, const JobSpec& spec,
                                              std::function<ExecResult(size_t, const ExecOptions&)> member);
  // submit's work; run_async's job may run on the caller's thread (the
  // short-job path: its answer goes out from the job's end either way).
  std::shared_ptr<Job> compile_and_submit(Tenant& tenant, JobSpec spec, bool may_run_here);
  std::shared_ptr<Job> enqueue(Tenant& tenant, const std::shared_ptr<Work>& w,
                               bool may_run_here);  // prepare + submit_prepared
  // Checks store/return names, picks the returned outputs, sets the
  // deadline and creates the job (not queued yet).
  void prepare(Tenant& tenant, const std::shared_ptr<Work>& w);
  // Queues a prepared job; throws (queue_full, unavailable) with nothing
  // queued. `may_run_here`: the caller's thread may run it before this
  // returns (it is not inside another job's end: a gate's next replay).
  std::shared_ptr<Job> submit_prepared(Tenant& tenant, const std::shared_ptr<Work>& w, bool may_run_here);
  // The longest typical run (Executable::typical_run_seconds) that runs on
  // the submitting thread: about a request's own cost, so an HTTP thread
  // is never held much longer than by the request itself.
  static constexpr double kRunHereSeconds = 100e-6;
  // A replay's prepare, then its pool's gate (replay_async).
  std::shared_ptr<Job> admit_replay(Tenant& tenant, const std::shared_ptr<Work>& w, std::function<void(Job&)> done);
  void record_end(const Job& job);

  CompileCache compiled_;  // /v1/run programs sent again (compile_cache.h)
  std::unique_ptr<Backend> backend_;
  std::vector<DeviceInfo> devices_;
  bool cpu_only_ = true;                                                 // no device backend (set at construction)
  std::shared_ptr<const std::map<std::string, std::string>> libraries_;  // JobResult::libraries
  mutable std::mutex config_mu_;                                         // guards config_ (reload)
  ServerConfig config_;
  std::unique_ptr<EngineMetrics> metrics_;
  // A stream pool per partition, one stream per runner at start (a runner
  // added by a reload shares one: index modulo the pool's size).
  std::map<std::string, std::unique_ptr<StreamPool>> streams_;
  std::unique_ptr<JobScheduler> scheduler_;
  std::atomic<int64_t> next_job_{1};
  // Running jobs: a drain cancels them; their busy time is counted every
  // second by busy_ticker_ (when metrics are on).
  std::unique_ptr<RunningJobs> running_;
  std::mutex ticker_mu_;
  std::condition_variable ticker_cv_;
  bool ticker_stop_ = false;
  std::thread busy_ticker_;
  std::unique_ptr<CollectiveMetrics> collective_metrics_;
  std::unique_ptr<RankWorkers> ranks_;
  // On the CUDA backend, local rank r's GPU and stream; else empty.
  std::vector<RankPlace> rank_places_;
  std::shared_ptr<SpmdPeers> peers_;
  std::function<void()> on_collective_timeout_;
  std::unique_ptr<SpmdKeys> keys_;  // where a group's members meet
};

}  // namespace tensord
