// ProcessGroup: the collectives seam (DESIGN.md "Seams", modelled on c10d's
// Backend). A group is `size()` ranks; this object is one of them. Each
// collective takes the group's next seq (from 1; the same on every rank,
// since every rank issues the group's collectives in the same order), is
// recorded in the rank's flight recorder, and returns a Work to wait on.
// Tensors are host tensors; results are new tensors (torch's functional
// collectives). An op or dtype the backend lacks fails by name
// (kUnsupported) before a seq is taken.
//
// Captured collectives (API.md 8: "on CUDA, NCCL kernels are captured into
// the graph"): a backend that enqueues collectives on a capturing device
// stream (supports_capture: NCCL) checks each call across the ranks once,
// before the capture (prepare_captured), enqueues it on the capturing
// stream (enqueue_captured), and every launch of the graph takes the seqs
// and flight-recorder entries of its collectives (record_replayed, through
// ops/dist/captured_collective.h). The others (Gloo) refuse by name.
//
// Thread-safety: the collective calls may come from any thread; their
// order of calls is the order of seqs. The base owns the thread the
// collectives run on (CollectiveWorker), so a backend implements the call
// (run) and what it supports. Implementations live in their own files
// (gloo_process_group.*, nccl/nccl_process_group.*).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ops/dist/collective.h"
#include "ops/dist/collective_worker.h"
#include "ops/dist/flight_recorder.h"
#include "ops/dist/work.h"
#include "ops/error.h"
#include "ops/tensor.h"
#include "streams/stream.h"

namespace tensord {
class CapturedWork;
}

namespace tensord::dist {

struct ProcessGroupOptions {
  // "world" or "ranks:1,3" (group_name()); keys the flight recorder.
  std::string name = "world";
  std::string desc;               // defaults to name
  std::vector<int> global_ranks;  // defaults to 0..size-1
  int64_t pg_id = 0;
  // Per-collective timeout when the call gives none (--collective-timeout).
  std::chrono::milliseconds timeout{60000};
  // The rank's flight recorder (shared by its groups); null: a private one
  // of FlightRecorder::kDefaultCapacity entries.
  std::shared_ptr<FlightRecorder> recorder;
  // Called as each collective is submitted (its seq taken), with this
  // rank's index in the group and the input bytes it contributes: the
  // server counts collectives with it.
  std::function<void(const std::string& group, int rank, CollectiveOp op, size_t bytes)> on_collective;
};

// "world" when `ranks` is 0..world_size-1, else "ranks:1,3".
std::string group_name(const std::vector<int>& ranks, int world_size);

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // "gloo", "nccl", ...
  virtual std::string_view backend_name() const = 0;
  // Whether the backend implements `op` at all.
  virtual bool supports(CollectiveOp op) const = 0;
  // Whether it can run `op` (with `reduce`, for reductions) on `dtype`.
  virtual bool supports_dtype(CollectiveOp op, ReduceOp reduce, DType dtype) const = 0;
  // Where its tensors live: host memory (Gloo) or a device's (NCCL).
  virtual bool takes_device_tensors() const { return false; }
  // c10d's abort: this rank gives up on the group (`reason` says why, e.g.
  // another rank of the job failed). Its collectives not yet finished fail
  // at once, later ones too, and its peers waiting on it in a collective
  // fail at once instead of at their timeout. Non-blocking, idempotent, any
  // thread. A backend without it (the default) leaves them to their timeout.
  virtual void abort(const std::string& reason) { (void)reason; }

  const std::string& name() const { return opts_.name; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::vector<int>& global_ranks() const { return opts_.global_ranks; }
  std::chrono::milliseconds default_timeout() const { return opts_.timeout; }
  const std::shared_ptr<FlightRecorder>& recorder() const { return opts_.recorder; }
  int64_t pg_id() const { return opts_.pg_id; }
  // Unique among the process's groups, never reused (a captured graph
  // knows whether it was captured in this very group).
  uint64_t uid() const { return uid_; }
  // The seq the last collective took (0: none yet).
  uint64_t last_seq() const;

  // The collectives (API.md 8). Throw (nothing recorded, no seq taken) when
  // the call is invalid on this rank; errors across ranks (mismatched
  // shapes, a rank that never arrives, a timeout) come from Work::wait.
  // Sum/avg/max/min/prod over every rank's x, elementwise.
  std::shared_ptr<Work> all_reduce(const Tensor& x, ReduceOp op = ReduceOp::kSum, const CollectiveOptions& o = {});
  // Every rank's x concatenated along `dim` in rank order; x may differ
  // across ranks along `dim` only.
  std::shared_ptr<Work> all_gather(const Tensor& x, int64_t dim = 0, const CollectiveOptions& o = {});
  // all_reduce, then this rank's part of x split evenly along `dim`.
  std::shared_ptr<Work> reduce_scatter(const Tensor& x, ReduceOp op = ReduceOp::kSum, int64_t dim = 0,
                                       const CollectiveOptions& o = {});
  // Rank `src`'s x on every rank (x gives the shape elsewhere).
  std::shared_ptr<Work> broadcast(const Tensor& x, int src = 0, const CollectiveOptions& o = {});
  // x split along `dim` (evenly, or by `split_sizes`: one extent per
  // rank), part r sent to rank r; the parts received concatenated along
  // `dim` in rank order.
  std::shared_ptr<Work> all_to_all(const Tensor& x, int64_t dim = 0, std::vector<int64_t> split_sizes = {},
                                   const CollectiveOptions& o = {});
  // Returns when every rank has called it.
  std::shared_ptr<Work> barrier(const CollectiveOptions& o = {});

  // The call a collective method above submits for `op` over x (null for
  // barrier): `reduce` for all_reduce and reduce_scatter, `dim` for
  // all_gather, reduce_scatter and all_to_all, `src` for broadcast,
  // `split_sizes` for all_to_all; checked on this rank as those methods
  // check theirs (throws; no seq taken). Its timeout is still unresolved.
  CollectiveCall make_call(CollectiveOp op, const Tensor* x, ReduceOp reduce = ReduceOp::kSum, int64_t dim = 0,
                           int src = 0, std::vector<int64_t> split_sizes = {}) const;
  // Runs a call from make_call: takes the next seq, records it, enqueues it.
  std::shared_ptr<Work> submit(CollectiveCall call, const CollectiveOptions& o = {});

  // Whether the backend enqueues collectives on a capturing device stream.
  virtual bool supports_capture() const { return false; }
  // Before a device graph's stream capture begins: checks, host-synchronous
  // and once (a captured graph's shapes are static), that every rank of the
  // group agrees on `call` (op, dtype, shape, src) and that the backend can
  // run it; every rank calls it for the same calls in the same order.
  // Bounded by the call's timeout; gives up (cancelled) once *cancelled
  // turns true. Takes no seq, records nothing. Unsupported by name where
  // the backend cannot capture.
  void prepare_captured(CollectiveCall call, const std::atomic<bool>* cancelled, const CollectiveOptions& o = {});
  // During the capture, on the capturing thread: enqueues a prepared `call`
  // on `stream`, its result written to `out` (device memory of the result's
  // shape); returns what each launch of the graph does for it (its seq,
  // flight-recorder entry and bounded wait). Unsupported by name where the
  // backend cannot capture.
  std::shared_ptr<CapturedWork> enqueue_captured(CollectiveCall call, const Tensor& out, Stream stream,
                                                 const CollectiveOptions& o = {});
  // One launch of a captured collective: takes the next seq, records the
  // call as scheduled and counts it (on_collective), as submit does, but
  // runs nothing (the graph's launch does); the caller reports through the
  // Work (mark_started, finish, fail). `call.timeout` must be resolved.
  std::shared_ptr<Work> record_replayed(CollectiveCall call);
  // Until `stream` has run a launch holding captured collectives of this
  // group, at most `timeout`; gives up (cancelled) once *cancelled turns
  // true. A backend that gives up aborts its communicator, so that the
  // launch's kernels end, and the group is broken from then on. `what`
  // names the launch in errors. Default: unsupported by name.
  virtual void wait_captured(Stream stream, std::chrono::milliseconds timeout, const std::atomic<bool>* cancelled,
                             const std::string& what);
  // Throws (unavailable) when the group can no longer run its captured
  // collectives (an aborted communicator). Default: nothing.
  virtual void check_captured_launch(const std::string& what) const {}

 protected:
  ProcessGroup(int rank, int size, ProcessGroupOptions opts);

  // The collective itself: runs on the group's worker thread, one call at
  // a time in seq order; returns its outputs (none for barrier) or throws,
  // and the call's Work finishes or fails with that. `agree_only`: an
  // agree_captured check across the ranks (no transfer, seq 0).
  virtual std::vector<Tensor> run(const CollectiveCall& call, bool agree_only) = 0;
  // Runs on the worker thread before its first call (a device's context).
  virtual void on_worker_start() {}
  // The worker's life, bracketing the backend's own: start_worker() last in
  // the backend's constructor, stop_worker() first in its destructor (the
  // worker calls run(), which needs the backend's members). stop_worker
  // fails the calls still queued (cancelled), calls `interrupt` (to end the
  // running call early) and waits for the running call.
  void start_worker();
  void stop_worker(const std::function<void()>& interrupt = {});
  // Fails the calls still queued (not the running one): cancelled, "<call>
  // was aborted: <why>" (abort()).
  void cancel_queued(const std::string& why);
  // Queues agree_captured's check (a Work of seq 0, recorded nowhere);
  // throws cancelled once the group is being destroyed.
  void enqueue_agreement(const CollectiveCall& call, const std::shared_ptr<Work>& work);

  // prepare_captured's check across the ranks, asynchronous: the Work
  // (seq 0, recorded nowhere) finishes once every rank agreed, or fails.
  // Default: unsupported by name.
  virtual std::shared_ptr<Work> agree_captured(const CollectiveCall& call);
  // enqueue_captured's launch on the capturing `stream`; returns what the
  // captured graph must hold for its life (the communicator it captured:
  // it must outlive the graph, even when the group is replaced). Default:
  // unsupported by name.
  virtual std::shared_ptr<void> launch_captured(const CollectiveCall& call, const Tensor& out, Stream stream);

  // "gloo all_reduce (seq 3) in group world": how errors name a collective.
  std::string describe(const CollectiveCall& call) const;
  // The error of a captured-path call on a backend that cannot capture.
  Error no_capture(std::string_view what) const;

 private:
  // Takes the next seq for `call` and records it (seq_mu_ held).
  std::shared_ptr<Work> take_seq(CollectiveCall& call);
  // Queues `call` on the worker (seq_mu_ held, so calls queue in seq order).
  void enqueue(CollectiveCall call, const std::shared_ptr<Work>& work);
  std::chrono::milliseconds resolve(const CollectiveOptions& o) const;
  void check_supported(CollectiveOp op, ReduceOp reduce, const Tensor* x) const;
  int64_t check_dim(const Tensor& x, int64_t dim, CollectiveOp op) const;

  const int rank_;
  const int size_;
  const uint64_t uid_;
  ProcessGroupOptions opts_;
  mutable std::mutex seq_mu_;
  uint64_t seq_ = 0;
  CollectiveWorker worker_;
};

}  // namespace tensord::dist
