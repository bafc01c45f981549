// ProcessGroup: the collectives seam (DESIGN.md "Seams", modelled on c10d's
// Backend). A group is `size()` ranks; this object is one of them. Each
// collective takes the group's next seq (from 1; the same on every rank,
// since every rank issues the group's collectives in the same order), is
// recorded in the rank's flight recorder, and returns a Work to wait on.
// Tensors are host tensors; results are new tensors (torch's functional
// collectives). An op or dtype the backend lacks fails by name
// (kUnsupported) before a seq is taken.
//
// Thread-safety: the collective calls may come from any thread; their
// order of calls is the order of seqs. Implementations live in their own
// files (gloo_process_group.*; NCCL later).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ops/dist/collective.h"
#include "ops/dist/flight_recorder.h"
#include "ops/dist/work.h"
#include "ops/tensor.h"

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

 protected:
  ProcessGroup(int rank, int size, ProcessGroupOptions opts);

  // Runs `call` asynchronously and reports through `work`. Called with the
  // seq lock held, so calls arrive in seq order; must not block on the
  // collective itself.
  virtual void enqueue(CollectiveCall call, std::shared_ptr<Work> work) = 0;

  // "gloo all_reduce (seq 3) in group world": how errors name a collective.
  std::string describe(const CollectiveCall& call) const;

 private:
  std::shared_ptr<Work> submit(CollectiveCall call, const CollectiveOptions& o);
  void check_supported(CollectiveOp op, ReduceOp reduce, const Tensor* x) const;
  int64_t check_dim(const Tensor& x, int64_t dim, CollectiveOp op) const;

  const int rank_;
  const int size_;
  ProcessGroupOptions opts_;
  mutable std::mutex seq_mu_;
  uint64_t seq_ = 0;
};

}  // namespace tensord::dist
