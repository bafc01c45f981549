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
// SPMD graph member's device graph capture (GraphHooks::capture) the device
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
#include <vector>

#include "ops/backend.h"
#include "ops/dist/process_group.h"
#include "ops/dist/spmd_infer.h"
#include "ops/error.h"
#include "ops/graph_hooks.h"
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
      // The poll ran out: look again (the work may have completed just
      // after it did, which is no error). A collective that failed with a
      // deadline of its own is completed: the loop's first line throws it.
      if (e.code() != ErrorCode::kDeadlineExceeded && !stopped()) throw;
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

// What a kernel asks of the group (ProcessGroup::make_call's
// arguments).
struct CallSpec {
  CollectiveOp op = CollectiveOp::kAllReduce;
  ReduceOp reduce = ReduceOp::kSum;
  int64_t dim = 0;
  int src = 0;
};

#if defined(TENSORD_DIST_DEVICE_KERNELS)
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
// wait) goes to the graph's captured_work. Without a group: a copy of x.
Tensor captured(const OpContext& ctx, const Tensor& x, const CallSpec& s) {
  const std::string name = "dist." + std::string(collective_op_name(s.op));
  if (!ctx.group) {
    if (graph_capture(ctx.graph) == CapturePhase::kPrepare) return Tensor();
    Tensor y = ctx.empty(x.dtype(), x.shape());
    if (x.nbytes()) ctx.backend->copy_on_device(ctx.stream, y.data(), x.data(), x.nbytes());
    return y;
  }
  CollectiveCall call = ctx.group->make_call(s.op, &x, s.reduce, s.dim, s.src);
  if (graph_capture(ctx.graph) == CapturePhase::kPrepare) {
    ctx.group->prepare_captured(std::move(call), ctx.cancelled);
    return Tensor();
  }
  TENSORD_CHECK(ctx.graph->captured_work != nullptr, kInternal,
                name + ": captured without a place for its replay work");
  Tensor y = ctx.empty(x.dtype(), result_shape(call, ctx.group->size()));
  ctx.graph->captured_work->push_back(ctx.group->enqueue_captured(std::move(call), y, ctx.stream));
  return y;
}

// The device kernel's collective on the rank's group. A group that takes
// device tensors gets x once the rank's stream has produced it (the group
// runs on a stream of its own) and returns its result on the rank's device,
// charged to the job; a host group (Gloo beside a device) gets a host copy
// and its result goes back to the device. Without a group (a program of one
// rank): a copy of x, ordered on the rank's stream.
Tensor on_device(const OpContext& ctx, const Tensor& x, const CallSpec& s) {
  if (graph_capture(ctx.graph) != CapturePhase::kNone) return captured(ctx, x, s);
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

// The ops' table: one row per collective. Everything else (the name, the
// dtypes, shape inference, the CPU and device kernels) follows from the
// collective and the attributes the row lists, so a new collective is one
// row here and its call in ProcessGroup.
struct CollectiveRow {
  CollectiveOp op;
  const char* doc;
  std::vector<ParamSpec> attrs;  // after `input` (none for barrier)
};

ParamSpec reduce_param() {
  return ParamSpec{"op", ParamKind::kString, Attr("sum"), false, true};
}
ParamSpec dim_param() {
  return ParamSpec{"dim", ParamKind::kInt, Attr(0), false, true};
}
ParamSpec src_param() {
  return ParamSpec{"src", ParamKind::kInt, Attr(0), false, true};
}

std::vector<CollectiveRow> collective_rows() {
  return {
      {CollectiveOp::kAllReduce,
       "Sum, avg, max, min or prod of input over every rank of the group, elementwise (replicated).",
       {reduce_param()}},
      {CollectiveOp::kAllGather,
       "Every rank's input concatenated along dim in rank order (replicated); extents along dim may differ.",
       {dim_param()}},
      {CollectiveOp::kReduceScatter,
       "all_reduce, then this rank's part of the result split evenly along dim.",
       {reduce_param(), dim_param()}},
      {CollectiveOp::kBroadcast,
       "Rank src's input (src: an index within the group) on every rank (replicated).",
       {src_param()}},
      {CollectiveOp::kAllToAll,
       "input split evenly along dim, part r sent to rank r, the parts received concatenated in rank order.",
       {dim_param()}},
      {CollectiveOp::kBarrier, "Returns when every rank of the group reached it; no operands, no outputs.", {}},
  };
}

bool reduces(CollectiveOp op) {
  return op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter;
}

// Where a row's attributes sit among its op's params.
struct Layout {
  CollectiveOp op = CollectiveOp::kAllReduce;
  std::string name;  // "dist.all_reduce"
  int reduce_at = -1;
  int dim_at = -1;
  int src_at = -1;
};

// The call's arguments from the node's attributes (x: the operand's meta),
// checked as ProcessGroup::make_call needs them.
template <class T>
CallSpec spec_of(const Layout& l, const TensorMeta& x, const OpArgs<T>& a) {
  CallSpec s;
  s.op = l.op;
  if (l.reduce_at >= 0) s.reduce = reduce_of(a.attr(static_cast<size_t>(l.reduce_at)), l.name);
  if (l.dim_at >= 0) s.dim = dim_of(x, a.attr(static_cast<size_t>(l.dim_at)), l.name);
  if (l.src_at >= 0) s.src = static_cast<int>(a.attr(static_cast<size_t>(l.src_at)).to_int((l.name + ": src").c_str()));
  return s;
}

// all_gather's result along dim: every rank's extent, known to the SPMD
// planner (SpmdInferContext::gather_extents), or this rank's times the
// group's size.
int64_t gathered_extent(const TensorMeta& x, int64_t d, const std::string& node) {
  SpmdInferContext* c = current_spmd_infer();
  const int64_t mine = x.shape[static_cast<size_t>(d)];
  if (!c) return mine;
  c->seen_extents[node] = mine;
  auto it = c->gather_extents.find(node);
  if (it == c->gather_extents.end()) return mine * c->group_size;
  int64_t total = 0;
  for (int64_t e : it->second) total += e;
  return total;
}

std::vector<TensorMeta> infer(const Layout& l, const OpArgs<TensorMeta>& a) {
  if (l.op == CollectiveOp::kBarrier) return {};
  TensorMeta out = a.tensor(0);
  if (l.reduce_at >= 0) reduce_of(a.attr(static_cast<size_t>(l.reduce_at)), l.name);
  if (reduces(l.op)) check_reduce_dtype(out, l.name);
  const CallSpec s = spec_of(l, out, a);
  const auto d = static_cast<size_t>(s.dim);
  switch (l.op) {
    case CollectiveOp::kAllGather:
      out.shape[d] = gathered_extent(out, s.dim, a.node);
      break;
    case CollectiveOp::kReduceScatter:
      check_even(out, s.dim, l.name);
      out.shape[d] /= group_size();
      break;
    case CollectiveOp::kAllToAll:
      check_even(out, s.dim, l.name);
      break;
    case CollectiveOp::kBroadcast:
      if (s.src < 0 || s.src >= group_size()) {
        throw Error(ErrorCode::kInvalidArgument, l.name + ": src " + std::to_string(s.src) +
                                                     " is outside the group of " + std::to_string(group_size()) +
                                                     " ranks");
      }
      break;
    default:
      break;
  }
  return {out};
}

// The CPU kernel: the collective on the rank's (host) group; without one,
// a copy of the operand.
std::vector<Tensor> run_on_host(const Layout& l, const OpContext& ctx, const OpArgs<Tensor>& a) {
  if (l.op == CollectiveOp::kBarrier) {
    if (ctx.group) wait_for(*ctx.group->barrier(), ctx);
    return {};
  }
  const Tensor& x = a.tensor(0);
  const CallSpec s = spec_of(l, x.meta(), a);
  check_host_group(ctx, l.name.c_str());
  if (!ctx.group) return {x.clone_host()};
  return {finish(ctx.group->submit(ctx.group->make_call(s.op, &x, s.reduce, s.dim, s.src)), ctx)};
}

OpDef collective_op(const CollectiveRow& row) {
  OpDef op;
  Layout l;
  l.op = row.op;
  l.name = "dist." + std::string(collective_op_name(row.op));
  op.name = l.name;
  op.doc = row.doc;
  if (row.op != CollectiveOp::kBarrier) {
    op.params.push_back(ParamSpec{"input", ParamKind::kTensor, Attr(), false, false});
    op.outputs = {"out"};
  } else {
    op.dtype_note = "takes no tensors";  // no operands: no dtype is refused
  }
  for (const ParamSpec& p : row.attrs) {
    const int at = static_cast<int>(op.params.size());
    if (p.name == "op") l.reduce_at = at;
    if (p.name == "dim") l.dim_at = at;
    if (p.name == "src") l.src_at = at;
    op.params.push_back(p);
  }
  op.dtypes = reduces(row.op) ? reduce_dtypes() : dtypes_all();
  op.infer = [l](const OpArgs<TensorMeta>& a) { return infer(l, a); };
  op.kernels["cpu"] = [l](const OpContext& ctx, const OpArgs<Tensor>& a) { return run_on_host(l, ctx, a); };
#if defined(TENSORD_DIST_DEVICE_KERNELS)
  if (row.op == CollectiveOp::kBarrier) {
    // No operands: the rank's earlier work need not be waited for.
    op.kernels["cuda"] = op.kernels["cpu"];
  } else {
    device_kernel(op, [l](const OpArgs<Tensor>& a) { return spec_of(l, a.tensor(0).meta(), a); });
  }
#endif
  op.collective = true;
  // What the SPMD planner knows of the result across ranks.
  const bool replicated =
      row.op == CollectiveOp::kAllReduce || row.op == CollectiveOp::kAllGather || row.op == CollectiveOp::kBroadcast;
  op.replication = replicated                         ? RankReplication::kReplicated
                   : row.op == CollectiveOp::kBarrier ? RankReplication::kFollowsOperands
                                                      : RankReplication::kPerRank;
  if (row.op == CollectiveOp::kAllGather) op.rank_varying_dim = l.dim_at;
  return op;
}

void register_dist_ops(OpRegistry& r) {
  for (const CollectiveRow& row : collective_rows()) r.add(collective_op(row));
}

const KernelRegistration kDistOps(register_dist_ops);

}  // namespace

void link_dist_ops() {
  // Nothing to do: referencing this function links this file, whose
  // KernelRegistration adds the ops.
}

}  // namespace tensord::dist
