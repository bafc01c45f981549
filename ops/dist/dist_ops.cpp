// The collective ops of API.md 8 (torch.distributed's functional
// collectives): dist.all_reduce, all_gather, reduce_scatter, broadcast,
// all_to_all, barrier. Their kernels run on the rank's ProcessGroup
// (OpContext::group, set for an SPMD job's ranks); without one a program is
// a group of one rank and each collective returns its operand.
//
// Each op has a CPU kernel (host tensors, for Gloo's groups) and, in a build
// with the CUDA backend, a "cuda" one (the server's ranks on GPUs, whose
// groups are NCCL's and take device tensors:
// ProcessGroup::takes_device_tensors). The latter only names the backend;
// it calls nothing of CUDA's, so this library stays free of it. Inside an
// SPMD graph member's device graph capture (OpContext::capture) the device
// kernels take the group's captured path: the call checked across the
// ranks before the capture, then enqueued on the capturing stream
// (ProcessGroup::prepare_captured, enqueue_captured).
//
// Registered from this library (tensord_dist) as a KernelRegistration, so
// the ops library stays free of Gloo; a binary that links the library's
// `link_dist_ops` (the scheduler's SPMD runner does) has them.
#include "ops/dist/dist_ops.h"

#include <chrono>
#include <functional>
#include <string>

#include "ops/backend.h"
#include "ops/dist/process_group.h"
#include "ops/dist/spmd_infer.h"
#include "ops/error.h"
#include "ops/op_registry.h"

namespace tensord::dist {

namespace {

int group_size() {
  const SpmdInferContext* c = current_spmd_infer();
  return c ? c->group_size : 1;
}

// The dtypes Gloo reduces (GlooProcessGroup::supports_dtype); moves take any.
const DTypeList& reduce_dtypes() {
  static const DTypeList d = {DType::kUInt8, DType::kInt8,    DType::kInt16,  DType::kInt32,
                              DType::kInt64, DType::kFloat32, DType::kFloat64};
  return d;
}

ReduceOp reduce_of(const Attr& a, const std::string& op) {
  const std::string& s = a.to_string((op + ": op").c_str());
  if (auto r = reduce_op_from_name(s)) return *r;
  throw Error(ErrorCode::kInvalidArgument,
              op + ": unknown reduction '" + s + "'; expected one of sum, avg, max, min, prod");
}

void check_reduce_dtype(const TensorMeta& x, const std::string& op) {
  for (DType d : reduce_dtypes()) {
    if (d == x.dtype) return;
  }
  throw Error(ErrorCode::kUnsupported, op + ": the collective backend does not reduce " +
                                           std::string(dtype_name(x.dtype)) +
                                           " (uint8, int8, int16, int32, int64, float32, float64)");
}

int64_t dim_of(const TensorMeta& x, const Attr& a, const std::string& op) {
  if (x.dim() == 0) throw Error(ErrorCode::kInvalidArgument, op + ": a 0-d tensor has no dim to split or join");
  return wrap_dim(a.to_int((op + ": dim").c_str()), x.dim(), op.c_str());
}

void check_even(const TensorMeta& x, int64_t d, const std::string& op) {
  const int n = group_size();
  if (x.shape[static_cast<size_t>(d)] % n != 0) {
    throw Error(ErrorCode::kShapeMismatch, op + ": " + x.str() + " does not split evenly along dim " +
                                               std::to_string(d) + " into " + std::to_string(n) + " ranks");
  }
}

// Waits for a collective, giving up when the job is cancelled (another rank
// failed, the deadline passed, the client went away): the group is then
// aborted and replaced (rank_workers). A collective that failed once the
// job was cancelled failed because of it (its peers were aborted): the
// cancellation is reported, so the job's error stays the rank's that failed
// first.
void wait_for(Work& work, const OpContext& ctx) {
  constexpr std::chrono::milliseconds kPoll{20};
  const auto stopped = [&] { return ctx.cancelled && ctx.cancelled->load(); };
  for (;;) {
    if (work.is_completed() && (work.is_success() || !stopped())) return work.wait();
    if (stopped()) {
      throw Error(ErrorCode::kCancelled, "cancelled while waiting in " + std::string(collective_op_name(work.op())) +
                                             " (seq " + std::to_string(work.seq()) + ") of group " + work.group());
    }
    try {
      return work.wait(kPoll);
    } catch (const Error& e) {
      const bool timed_out_waiting = e.code() == ErrorCode::kDeadlineExceeded && !work.is_completed();
      if (!timed_out_waiting && !stopped()) throw;
    }
  }
}

Tensor finish(const std::shared_ptr<Work>& w, const OpContext& ctx) {
  wait_for(*w, ctx);
  return w->result();
}

// Where a CPU kernel meets a group that takes device tensors (a node placed
// on the host beside the ranks' GPUs): refused by name rather than handing
// NCCL a host pointer.
void check_host_group(const OpContext& ctx, const char* op) {
  if (ctx.group && ctx.group->takes_device_tensors()) {
    throw Error(ErrorCode::kUnsupported, std::string(op) + ": the rank's " + std::string(ctx.group->backend_name()) +
                                             " group takes device tensors; this call was placed on the host");
  }
}

#if defined(TENSORD_DIST_DEVICE_KERNELS)
// What a device kernel asks of the group (ProcessGroup::make_call's
// arguments).
struct CallSpec {
  CollectiveOp op = CollectiveOp::kAllReduce;
  ReduceOp reduce = ReduceOp::kSum;
  int64_t dim = 0;
  int src = 0;
};

Shape result_shape(const CollectiveCall& call, int group_size) {
  Shape s = call.input.shape();
  if (call.op == CollectiveOp::kAllGather) s[static_cast<size_t>(call.dim)] *= group_size;
  if (call.op == CollectiveOp::kReduceScatter) s[static_cast<size_t>(call.dim)] /= group_size;
  return s;
}

// Inside a device graph's capture (graphs/device_graph.h): before it
// (kPrepare) the ranks check the call once; during it (kRecord) the
// collective is enqueued on the capturing stream, its result in the node's
// buffer, and each launch's host work (seq, flight recorder, the bounded
// wait) goes to ctx.captured_work. Without a group: a copy of x.
Tensor captured(const OpContext& ctx, const Tensor& x, const CallSpec& s) {
  const std::string name = "dist." + std::string(collective_op_name(s.op));
  if (!ctx.group) {
    if (ctx.capture == CapturePhase::kPrepare) return Tensor();
    Tensor y = ctx.empty(x.dtype(), x.shape());
    if (x.nbytes()) ctx.backend->copy_on_device(ctx.stream, y.data(), x.data(), x.nbytes());
    return y;
  }
  CollectiveCall call = ctx.group->make_call(s.op, &x, s.reduce, s.dim, s.src);
  if (ctx.capture == CapturePhase::kPrepare) {
    ctx.group->prepare_captured(std::move(call), ctx.cancelled);
    return Tensor();
  }
  TENSORD_CHECK(ctx.captured_work != nullptr, kInternal, name + ": captured without a place for its replay work");
  Tensor y = ctx.empty(x.dtype(), result_shape(call, ctx.group->size()));
  ctx.captured_work->push_back(ctx.group->enqueue_captured(std::move(call), y, ctx.stream));
  return y;
}

// The device kernel's collective on the rank's group. A group that takes
// device tensors gets x once the rank's stream has produced it (the group
// runs on a stream of its own) and returns its result on the rank's device,
// charged to the job; a host group (Gloo beside a device) gets a host copy
// and its result goes back to the device. Without a group (a program of one
// rank): a copy of x, ordered on the rank's stream.
Tensor on_device(const OpContext& ctx, const Tensor& x, const CallSpec& s) {
  if (ctx.capture != CapturePhase::kNone) return captured(ctx, x, s);
  if (!ctx.group) {
    Tensor y = ctx.empty(x.dtype(), x.shape());
    if (x.nbytes()) ctx.backend->copy_on_device(ctx.stream, y.data(), x.data(), x.nbytes());
    return y;
  }
  ProcessGroup& g = *ctx.group;
  if (!g.takes_device_tensors()) {
    const Tensor h = x.to_host();
    Tensor y = finish(g.submit(g.make_call(s.op, &h, s.reduce, s.dim, s.src)), ctx);
    return y.to_device(ctx.backend, ctx.device, ctx.account);
  }
  ctx.backend->synchronize(ctx.stream);
  Tensor y = finish(g.submit(g.make_call(s.op, &x, s.reduce, s.dim, s.src)), ctx);
  if (ctx.account && y.defined() && !y.on_host() && !y.storage()->account()) y.storage()->charge(ctx.account);
  return y;
}

// A collective's device kernel; capture-safe: an SPMD graph member's device
// graph captures it where its group can (DeviceGraph::capturable). barrier
// (no result) keeps the CPU kernel and is never captured.
void device_kernel(OpDef& op, std::function<CallSpec(const OpArgs<Tensor>&)> spec) {
  op.capture_safe.insert("cuda");
  op.kernels["cuda"] = [spec = std::move(spec)](const OpContext& ctx, const OpArgs<Tensor>& a) {
    return std::vector<Tensor>{on_device(ctx, a.tensor(0), spec(a))};
  };
}
#endif

ParamSpec input_param() {
  return ParamSpec{"input", ParamKind::kTensor, Attr(), false, false};
}

void add_all_reduce(OpRegistry& r) {
  OpDef op;
  op.name = "dist.all_reduce";
  op.doc = "Sum, avg, max, min or prod of input over every rank of the group, elementwise (replicated).";
  op.params = {input_param(), ParamSpec{"op", ParamKind::kString, Attr("sum"), false, true}};
  op.outputs = {"out"};
  op.dtypes = reduce_dtypes();
  op.infer = [](const OpArgs<TensorMeta>& a) {
    reduce_of(a.attr(1), "dist.all_reduce");
    check_reduce_dtype(a.tensor(0), "dist.all_reduce");
    return std::vector<TensorMeta>{a.tensor(0)};
  };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const ReduceOp red = reduce_of(a.attr(1), "dist.all_reduce");
    check_host_group(ctx, "dist.all_reduce");
    if (!ctx.group) return std::vector<Tensor>{a.tensor(0).clone_host()};
    return std::vector<Tensor>{finish(ctx.group->all_reduce(a.tensor(0), red), ctx)};
  };
#if defined(TENSORD_DIST_DEVICE_KERNELS)
  device_kernel(op, [](const OpArgs<Tensor>& a) {
    return CallSpec{CollectiveOp::kAllReduce, reduce_of(a.attr(1), "dist.all_reduce")};
  });
#endif
  op.collective = true;
  r.add(std::move(op));
}

void add_all_gather(OpRegistry& r) {
  OpDef op;
  op.name = "dist.all_gather";
  op.doc = "Every rank's input concatenated along dim in rank order (replicated); extents along dim may differ.";
  op.params = {input_param(), ParamSpec{"dim", ParamKind::kInt, Attr(0), false, true}};
  op.outputs = {"out"};
  op.dtypes = dtypes_all();
  op.infer = [](const OpArgs<TensorMeta>& a) {
    TensorMeta out = a.tensor(0);
    const auto d = static_cast<size_t>(dim_of(out, a.attr(1), "dist.all_gather"));
    SpmdInferContext* c = current_spmd_infer();
    const int64_t mine = out.shape[d];
    int64_t total = mine * (c ? c->group_size : 1);
    if (c) {
      c->seen_extents[a.node] = mine;
      auto it = c->gather_extents.find(a.node);
      if (it != c->gather_extents.end()) {
        total = 0;
        for (int64_t e : it->second) total += e;
      }
    }
    out.shape[d] = total;
    return std::vector<TensorMeta>{out};
  };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const int64_t d = dim_of(a.tensor(0).meta(), a.attr(1), "dist.all_gather");
    check_host_group(ctx, "dist.all_gather");
    if (!ctx.group) return std::vector<Tensor>{a.tensor(0).clone_host()};
    return std::vector<Tensor>{finish(ctx.group->all_gather(a.tensor(0), d), ctx)};
  };
#if defined(TENSORD_DIST_DEVICE_KERNELS)
  device_kernel(op, [](const OpArgs<Tensor>& a) {
    return CallSpec{CollectiveOp::kAllGather, ReduceOp::kSum, dim_of(a.tensor(0).meta(), a.attr(1), "dist.all_gather")};
  });
#endif
  op.collective = true;
  r.add(std::move(op));
}

void add_reduce_scatter(OpRegistry& r) {
  OpDef op;
  op.name = "dist.reduce_scatter";
  op.doc = "all_reduce, then this rank's part of the result split evenly along dim.";
  op.params = {input_param(), ParamSpec{"op", ParamKind::kString, Attr("sum"), false, true},
               ParamSpec{"dim", ParamKind::kInt, Attr(0), false, true}};
  op.outputs = {"out"};
  op.dtypes = reduce_dtypes();
  op.infer = [](const OpArgs<TensorMeta>& a) {
    const std::string name = "dist.reduce_scatter";
    reduce_of(a.attr(1), name);
    check_reduce_dtype(a.tensor(0), name);
    TensorMeta out = a.tensor(0);
    const int64_t d = dim_of(out, a.attr(2), name);
    check_even(out, d, name);
    out.shape[static_cast<size_t>(d)] /= group_size();
    return std::vector<TensorMeta>{out};
  };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const std::string name = "dist.reduce_scatter";
    const ReduceOp red = reduce_of(a.attr(1), name);
    const int64_t d = dim_of(a.tensor(0).meta(), a.attr(2), name);
    check_host_group(ctx, "dist.reduce_scatter");
    if (!ctx.group) return std::vector<Tensor>{a.tensor(0).clone_host()};
    return std::vector<Tensor>{finish(ctx.group->reduce_scatter(a.tensor(0), red, d), ctx)};
  };
#if defined(TENSORD_DIST_DEVICE_KERNELS)
  device_kernel(op, [](const OpArgs<Tensor>& a) {
    const std::string name = "dist.reduce_scatter";
    return CallSpec{CollectiveOp::kReduceScatter, reduce_of(a.attr(1), name),
                    dim_of(a.tensor(0).meta(), a.attr(2), name)};
  });
#endif
  op.collective = true;
  r.add(std::move(op));
}

void add_broadcast(OpRegistry& r) {
  OpDef op;
  op.name = "dist.broadcast";
  op.doc = "Rank src's input (src: an index within the group) on every rank (replicated).";
  op.params = {input_param(), ParamSpec{"src", ParamKind::kInt, Attr(0), false, true}};
  op.outputs = {"out"};
  op.dtypes = dtypes_all();
  op.infer = [](const OpArgs<TensorMeta>& a) {
    const int64_t src = a.attr(1).to_int("dist.broadcast: src");
    const int n = group_size();
    if (src < 0 || src >= n) {
      throw Error(ErrorCode::kInvalidArgument, "dist.broadcast: src " + std::to_string(src) +
                                                   " is outside the group of " + std::to_string(n) + " ranks");
    }
    return std::vector<TensorMeta>{a.tensor(0)};
  };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const auto src = static_cast<int>(a.attr(1).to_int("dist.broadcast: src"));
    check_host_group(ctx, "dist.broadcast");
    if (!ctx.group) return std::vector<Tensor>{a.tensor(0).clone_host()};
    return std::vector<Tensor>{finish(ctx.group->broadcast(a.tensor(0), src), ctx)};
  };
#if defined(TENSORD_DIST_DEVICE_KERNELS)
  device_kernel(op, [](const OpArgs<Tensor>& a) {
    return CallSpec{CollectiveOp::kBroadcast, ReduceOp::kSum, 0,
                    static_cast<int>(a.attr(1).to_int("dist.broadcast: src"))};
  });
#endif
  op.collective = true;
  r.add(std::move(op));
}

void add_all_to_all(OpRegistry& r) {
  OpDef op;
  op.name = "dist.all_to_all";
  op.doc = "input split evenly along dim, part r sent to rank r, the parts received concatenated in rank order.";
  op.params = {input_param(), ParamSpec{"dim", ParamKind::kInt, Attr(0), false, true}};
  op.outputs = {"out"};
  op.dtypes = dtypes_all();
  op.infer = [](const OpArgs<TensorMeta>& a) {
    const int64_t d = dim_of(a.tensor(0), a.attr(1), "dist.all_to_all");
    check_even(a.tensor(0), d, "dist.all_to_all");
    return std::vector<TensorMeta>{a.tensor(0)};
  };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const int64_t d = dim_of(a.tensor(0).meta(), a.attr(1), "dist.all_to_all");
    check_host_group(ctx, "dist.all_to_all");
    if (!ctx.group) return std::vector<Tensor>{a.tensor(0).clone_host()};
    return std::vector<Tensor>{finish(ctx.group->all_to_all(a.tensor(0), d), ctx)};
  };
#if defined(TENSORD_DIST_DEVICE_KERNELS)
  device_kernel(op, [](const OpArgs<Tensor>& a) {
    return CallSpec{CollectiveOp::kAllToAll, ReduceOp::kSum, dim_of(a.tensor(0).meta(), a.attr(1), "dist.all_to_all")};
  });
#endif
  op.collective = true;
  r.add(std::move(op));
}

void add_barrier(OpRegistry& r) {
  OpDef op;
  op.name = "dist.barrier";
  op.doc = "Returns when every rank of the group reached it; no operands, no outputs.";
  op.dtypes = dtypes_all();  // no operands: no dtype is refused
  op.dtype_note = "takes no tensors";
  op.infer = [](const OpArgs<TensorMeta>&) { return std::vector<TensorMeta>{}; };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>&) {
    if (ctx.group) wait_for(*ctx.group->barrier(), ctx);
    return std::vector<Tensor>{};
  };
  // No operands: the rank's earlier work need not be waited for.
#if defined(TENSORD_DIST_DEVICE_KERNELS)
  op.kernels["cuda"] = op.kernels["cpu"];
#endif
  op.collective = true;
  r.add(std::move(op));
}

void register_dist_ops(OpRegistry& r) {
  add_all_reduce(r);
  add_all_gather(r);
  add_reduce_scatter(r);
  add_broadcast(r);
  add_all_to_all(r);
  add_barrier(r);
}

const KernelRegistration kDistOps(register_dist_ops);

}  // namespace

bool is_collective_op(std::string_view op) {
  return op.starts_with("dist.");
}

void link_dist_ops() {
  // Nothing to do: referencing this function links this file, whose
  // KernelRegistration adds the ops.
}

}  // namespace tensord::dist
