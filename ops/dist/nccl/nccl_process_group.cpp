#include "ops/dist/nccl/nccl_process_group.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "ops/cuda/cuda_ops.h"
#include "ops/dist/store.h"
#include "ops/dist/work.h"
#include "ops/error.h"
#include "ops/tensor.h"

namespace tensord::dist {

namespace chr = std::chrono;

struct NcclProcessGroup::Comm {
  // comm and broken: the group's thread uses them, and so does a rank thread
  // that waits for a captured launch (the group's thread is idle then).
  mutable std::mutex mu;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  std::string broken;  // why the group is unusable

  Comm() = default;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  ~Comm() {
    if (comm) {
      cudaSetDevice(device);
      ncclCommDestroy(comm);
    }
    if (stream) cudaStreamDestroy(stream);
  }
};

namespace {

void check_nccl(ncclResult_t r, const std::string& what) {
  if (r != ncclSuccess) throw Error(ErrorCode::kUnavailable, what + ": " + ncclGetErrorString(r));
}

void check_cuda(cudaError_t r, const std::string& what) {
  if (r != cudaSuccess) throw Error(ErrorCode::kInternal, what + ": " + cudaGetErrorString(r));
}

std::optional<ncclDataType_t> nccl_dtype(DType t) {
  switch (t) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    case DType::kInt8:
      return ncclInt8;
    case DType::kUInt8:
      return ncclUint8;
    default:
      return std::nullopt;
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kProd:
      return ncclProd;
  }
  return ncclSum;
}

Shape result_shape(const CollectiveCall& call, int n) {
  Shape s = call.input.shape();
  if (call.op == CollectiveOp::kAllGather) s[0] *= n;
  if (call.op == CollectiveOp::kReduceScatter) s[0] /= n;
  return s;
}

// The NCCL call(s) of `call` on `st`, its result written to y (checked,
// launchable: dim 0, even all_to_all parts). Waits for nothing: on a
// capturing stream NCCL records graph nodes instead.
void launch(const CollectiveCall& call, const Tensor& y, int n, ncclComm_t comm, cudaStream_t st,
            const std::string& what) {
  const Tensor& x = call.input;
  const size_t bytes = x.nbytes();
  switch (call.op) {
    case CollectiveOp::kAllReduce:
      check_nccl(ncclAllReduce(x.data(), y.data(), static_cast<size_t>(x.numel()), *nccl_dtype(x.dtype()),
                               nccl_op(call.reduce), comm, st),
                 what);
      break;
    case CollectiveOp::kAllGather:
      check_nccl(ncclAllGather(x.data(), y.data(), bytes, ncclUint8, comm, st), what);
      break;
    case CollectiveOp::kReduceScatter:
      check_nccl(ncclReduceScatter(x.data(), y.data(), static_cast<size_t>(y.numel()), *nccl_dtype(x.dtype()),
                                   nccl_op(call.reduce), comm, st),
                 what);
      break;
    case CollectiveOp::kBroadcast:
      check_nccl(ncclBroadcast(x.data(), y.data(), bytes, ncclUint8, call.src, comm, st), what);
      break;
    case CollectiveOp::kAllToAll: {
      const size_t part = bytes / static_cast<size_t>(n);
      check_nccl(ncclGroupStart(), what);
      for (int r = 0; r < n; ++r) {
        ncclSend(static_cast<const char*>(x.data()) + r * part, part, ncclUint8, r, comm, st);
        ncclRecv(static_cast<char*>(y.data()) + r * part, part, ncclUint8, r, comm, st);
      }
      check_nccl(ncclGroupEnd(), what);
      break;
    }
    case CollectiveOp::kBarrier:
      break;
  }
}

enum class Waited : uint8_t { kDone, kTimedOut, kCancelled };

// Polls `st` until it has run what was enqueued, `timeout` passes or
// *cancelled turns true.
Waited poll(cudaStream_t st, chr::milliseconds timeout, const std::atomic<bool>* cancelled, const std::string& what) {
  const auto until = chr::steady_clock::now() + timeout;
  for (;;) {
    const cudaError_t q = cudaStreamQuery(st);
    if (q == cudaSuccess) return Waited::kDone;
    if (q != cudaErrorNotReady) check_cuda(q, what);
    if (cancelled && cancelled->load()) return Waited::kCancelled;
    if (chr::steady_clock::now() >= until) return Waited::kTimedOut;
    std::this_thread::sleep_for(chr::microseconds(50));
  }
}

}  // namespace

std::string NcclProcessGroup::version() {
  int v = 0;
  ncclGetVersion(&v);
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

NcclProcessGroup::NcclProcessGroup(int rank, int size, ProcessGroupOptions opts, NcclOptions nccl)
    : ProcessGroup(rank, size, std::move(opts)), nccl_(std::move(nccl)), comm_(std::make_shared<Comm>()) {
  TENSORD_CHECK(nccl_.store != nullptr && nccl_.backend != nullptr, kInvalidArgument,
                "nccl group " + name() + ": no store or backend");
  comm_->device = nccl_.device.index;
  check_cuda(cudaSetDevice(comm_->device), "nccl: cudaSetDevice");
  const std::string key = (nccl_.key_prefix.empty() ? name() : nccl_.key_prefix) + "/nccl-id";
  ncclUniqueId id;
  if (rank == 0) {
    check_nccl(ncclGetUniqueId(&id), "nccl: ncclGetUniqueId");
    store_set(*nccl_.store, key, std::string(id.internal, sizeof(id.internal)));
  } else {
    const auto until = chr::steady_clock::now() + nccl_.rendezvous_timeout;
    while (!store_has_key(*nccl_.store, key)) {
      if (chr::steady_clock::now() >= until) {
        throw Error(ErrorCode::kDeadlineExceeded, "nccl group " + name() + ": rank 0's id never came");
      }
      std::this_thread::sleep_for(chr::milliseconds(5));
    }
    const std::string v = store_get(*nccl_.store, key);
    TENSORD_CHECK(v.size() == sizeof(id.internal), kInternal, "nccl group " + name() + ": a malformed id");
    std::memcpy(id.internal, v.data(), v.size());
  }
  check_nccl(ncclCommInitRank(&comm_->comm, size, id, rank), "nccl: ncclCommInitRank");
  check_cuda(cudaStreamCreateWithFlags(&comm_->stream, cudaStreamNonBlocking), "nccl: cudaStreamCreate");
  recorder()->set_comm_lib_version(version());
  start_worker();
}

NcclProcessGroup::~NcclProcessGroup() {
  stop_worker();
  // The communicator and stream go with comm_'s last owner (Comm's
  // destructor): this group, or a device graph captured in it.
}

bool NcclProcessGroup::supports(CollectiveOp) const {
  return true;
}

bool NcclProcessGroup::supports_dtype(CollectiveOp op, ReduceOp, DType dtype) const {
  if (op != CollectiveOp::kAllReduce && op != CollectiveOp::kReduceScatter) return true;  // moved as bytes
  return nccl_dtype(dtype).has_value();
}

void NcclProcessGroup::on_worker_start() {
  cudaSetDevice(comm_->device);
}

void* NcclProcessGroup::usable_comm(const std::string& what) const {
  std::lock_guard lk(comm_->mu);
  if (!comm_->broken.empty()) {
    throw Error(ErrorCode::kUnavailable, what + " cannot run: the group is broken (" + comm_->broken + ")");
  }
  return comm_->comm;
}

void NcclProcessGroup::abort_comm(const std::string& why) {
  std::lock_guard lk(comm_->mu);
  if (comm_->comm) ncclCommAbort(comm_->comm);
  comm_->comm = nullptr;
  if (comm_->broken.empty()) comm_->broken = why;
}

std::vector<Tensor> NcclProcessGroup::run(const CollectiveCall& call, bool agree_only) {
  const std::string what = agree_only ? describe(call) + " (the ranks' check before a graph capture)" : describe(call);
  auto* comm = static_cast<ncclComm_t>(usable_comm(what));
  cudaStream_t st = comm_->stream;
  const int n = size();
  // Every rank's fingerprint first, so ranks that disagree fail together
  // by name instead of corrupting NCCL's transfers: seq, op, reduction,
  // dtype, elements per row along dim 0, rows, src.
  const Tensor& x = call.input;
  const int64_t rows = x.defined() && x.dim() > 0 ? x.shape()[0] : 1;
  const int64_t per_row = x.defined() ? (rows > 0 ? x.numel() / rows : 0) : 0;
  constexpr int kFp = 7;
  const int64_t mine[kFp] = {static_cast<int64_t>(call.seq),
                             static_cast<int64_t>(call.op),
                             static_cast<int64_t>(call.reduce),
                             x.defined() ? static_cast<int64_t>(x.dtype()) : -1,
                             per_row,
                             rows,
                             call.src};
  Tensor fp = Tensor::empty(nccl_.backend, nccl_.device, DType::kInt64, {static_cast<int64_t>(n) * kFp}, nullptr);
  check_cuda(
      cudaMemcpyAsync(static_cast<int64_t*>(fp.data()) + rank() * kFp, mine, sizeof(mine), cudaMemcpyHostToDevice, st),
      what);
  check_nccl(ncclAllGather(static_cast<int64_t*>(fp.data()) + rank() * kFp, fp.data(), kFp, ncclInt64, comm, st), what);
  std::vector<int64_t> all(static_cast<size_t>(n) * kFp);
  check_cuda(cudaMemcpyAsync(all.data(), fp.data(), all.size() * sizeof(int64_t), cudaMemcpyDeviceToHost, st), what);

  // Waits for the stream, bounded by the call's timeout; a timeout aborts
  // the communicator and breaks the group (as an aborted c10d group).
  auto wait = [&] {
    if (poll(st, call.timeout, nullptr, what) == Waited::kTimedOut) {
      abort_comm(what + " timed out");
      throw Error(ErrorCode::kDeadlineExceeded,
                  what + " timed out after " + std::to_string(call.timeout.count()) + " ms");
    }
  };
  wait();
  for (int r = 0; r < n; ++r) {
    const int64_t* f = &all[static_cast<size_t>(r) * kFp];
    bool same =
        f[0] == mine[0] && f[1] == mine[1] && f[2] == mine[2] && f[3] == mine[3] && f[4] == mine[4] && f[6] == mine[6];
    // all_gather's parts may differ in rows only if NCCL could gather them:
    // it cannot (equal counts), so rows must agree everywhere.
    same = same && f[5] == mine[5];
    if (!same) {
      throw Error(ErrorCode::kShapeMismatch,
                  what + ": rank " + std::to_string(r) + " disagrees (op, dtype or shape; NCCL needs equal parts)");
    }
  }
  if (call.op == CollectiveOp::kBarrier) return {};
  TENSORD_CHECK(call.dim == 0 || call.op == CollectiveOp::kAllReduce || call.op == CollectiveOp::kBroadcast,
                kUnsupported, "backend nccl " + std::string(collective_op_name(call.op)) + " takes dim 0 only");
  if (call.op == CollectiveOp::kAllToAll) {
    for (int64_t s : call.split_sizes) {
      TENSORD_CHECK(s == call.split_sizes[0], kUnsupported, "backend nccl all_to_all takes even splits only");
    }
  }
  if (agree_only) return {};
  Tensor y = Tensor::empty(nccl_.backend, nccl_.device, x.dtype(), result_shape(call, n), nccl_.account);
  launch(call, y, n, comm, st, what);
  wait();
  return {y};
}

std::shared_ptr<Work> NcclProcessGroup::agree_captured(const CollectiveCall& call) {
  // Seq 0 on every rank, recorded nowhere: each launch of the graph takes
  // the seqs (record_replayed).
  auto work = std::make_shared<Work>(name(), call.op, 0, nullptr, 0);
  enqueue_agreement(call, work);
  return work;
}

std::shared_ptr<void> NcclProcessGroup::launch_captured(const CollectiveCall& call, const Tensor& out, Stream stream) {
  const std::string what = "nccl " + std::string(collective_op_name(call.op)) + " captured in group " + name();
  TENSORD_CHECK(call.op != CollectiveOp::kBarrier, kUnsupported, what + ": a barrier is not captured");
  TENSORD_CHECK(
      out.defined() && !out.on_host() && out.dtype() == call.input.dtype() && out.shape() == result_shape(call, size()),
      kInternal, what + ": the result buffer is not " + call.input.meta().str() + "'s result");
  auto* comm = static_cast<ncclComm_t>(usable_comm(what));
  OpContext ctx;
  ctx.backend = nccl_.backend;
  ctx.stream = stream;
  cudaStream_t st = cuda::raw_stream(ctx);  // also makes the stream's device current
  launch(call, out, size(), comm, st, what);
  return comm_;
}

void NcclProcessGroup::check_captured_launch(const std::string& what) const {
  usable_comm(what);
}

void NcclProcessGroup::wait_captured(Stream stream, std::chrono::milliseconds timeout,
                                     const std::atomic<bool>* cancelled, const std::string& what) {
  OpContext ctx;
  ctx.backend = nccl_.backend;
  ctx.stream = stream;
  cudaStream_t st = cuda::raw_stream(ctx);
  const Waited w = poll(st, timeout, cancelled, what);
  if (w == Waited::kDone) return;
  const std::string why = w == Waited::kTimedOut
                              ? what + " timed out after " + std::to_string(timeout.count()) + " ms"
                              : what +
                                    " was cancelled (another rank failed, or the job was cancelled or ran past "
                                    "its deadline)";
  // Its kernels wait for peers that may never come: the abort ends them,
  // so the stream (the rank's) is free again; the group is replaced.
  abort_comm(why);
  poll(st, timeout, nullptr, what);
  throw Error(w == Waited::kTimedOut ? ErrorCode::kDeadlineExceeded : ErrorCode::kCancelled,
              why + "; the group's communicator was aborted");
}

GroupFactory nccl_group_factory(Backend* backend) {
  GroupFactory f;
  f.backend = "nccl";
  f.version = NcclProcessGroup::version();
  f.make = [backend](int rank, int size, ProcessGroupOptions po, const GroupJoin& join) {
    NcclOptions no;
    no.store = join.store;
    no.key_prefix = join.key_prefix;
    no.backend = backend;
    no.device = Device{DeviceType::kCUDA, static_cast<int16_t>(join.local_rank)};
    no.rendezvous_timeout = join.rendezvous_timeout;
    return std::unique_ptr<ProcessGroup>(std::make_unique<NcclProcessGroup>(rank, size, std::move(po), std::move(no)));
  };
  return f;
}

}  // namespace tensord::dist
