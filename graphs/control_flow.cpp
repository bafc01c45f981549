// Long file: cond, while_loop, scan, map and associative_scan are parsed,
// shape-inferred, run and batched here together; issue 13 splits it into a
// compile half and a run half behind one node runner.
#include "graphs/control_flow.h"

#include <cstring>
#include <set>

#include "graphs/executor.h"
#include "graphs/node_runner.h"
#include "ops/error.h"

namespace tensord {
namespace {

const char* kind_name(ControlKind k) {
  switch (k) {
    case ControlKind::kCond:
      return "cond";
    case ControlKind::kWhileLoop:
      return "while_loop";
    case ControlKind::kScan:
      return "scan";
    case ControlKind::kMap:
      return "map";
    case ControlKind::kAssociativeScan:
      return "associative_scan";
  }
  return "?";
}

std::string where(const ControlFlow& cf, const std::string& node) {
  return std::string(kind_name(cf.kind)) + " '" + node + "'";
}

[[noreturn]] void invalid_program(const std::string& msg, const std::string& node) {
  throw Error(ErrorCode::kInvalidProgram, msg, node);
}
[[noreturn]] void invalid_argument(const std::string& msg, const std::string& node) {
  throw Error(ErrorCode::kInvalidArgument, msg, node);
}

std::string metas_str(const std::vector<TensorMeta>& ms) {
  std::string s = "(";
  for (size_t i = 0; i < ms.size(); ++i) s += (i ? ", " : "") + ms[i].str();
  return s + ")";
}

bool same_meta(const TensorMeta& a, const TensorMeta& b) {
  return a.dtype == b.dtype && a.shape == b.shape;
}

bool same_metas(const std::vector<TensorMeta>& a, const std::vector<TensorMeta>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!same_meta(a[i], b[i])) return false;
  }
  return true;
}

bool is_bool_scalar(const TensorMeta& m) {
  return m.dtype == DType::kBool && m.numel() == 1;
}

// Appends the operands one arg stands for: a value name, a list of value
// names, or an inline tensor.
size_t flatten_arg(const ArgExpr& a, const std::string& op, const std::string& node, std::vector<ArgExpr>* out) {
  using K = ArgExpr::Kind;
  if (a.kind == K::kString || a.kind == K::kTensor) {
    out->push_back(a);
    return 1;
  }
  if (a.kind == K::kStringList) {
    for (const auto& s : a.strs) {
      ArgExpr e;
      e.kind = K::kString;
      e.str = s;
      out->push_back(std::move(e));
    }
    return a.strs.size();
  }
  invalid_argument(op + ": operands must be value names, lists of value names or inline tensors", node);
}

std::vector<TensorMeta> output_metas(const CompiledProgram& cp) {
  std::vector<TensorMeta> out;
  for (const auto& [name, id] : cp.outputs) out.push_back(cp.values[static_cast<size_t>(id)].meta);
  return out;
}

std::shared_ptr<const CompiledProgram> compile_body(const ControlFlow& cf, const std::string& key,
                                                    const std::vector<TensorMeta>& metas, const std::string& node,
                                                    const StoredLookup& stored) {
  const Program& p = *cf.programs.at(key);
  const std::string w = where(cf, node) + ": subprogram \"" + key + "\"";
  if (p.inputs.size() != metas.size()) {
    invalid_program(w + " declares " + std::to_string(p.inputs.size()) + " inputs, the node passes " +
                        std::to_string(metas.size()) + " " + metas_str(metas),
                    node);
  }
  std::map<std::string, TensorMeta> im;
  for (size_t k = 0; k < metas.size(); ++k) {
    if (!same_meta(p.inputs[k].meta, metas[k])) {
      invalid_program(w + " input " + std::to_string(k) + " '" + p.inputs[k].name + "' is declared " +
                          p.inputs[k].meta.str() + " but receives " + metas[k].str(),
                      node);
    }
    TensorMeta m = metas[k];
    m.wrapped_number = false;
    im[p.inputs[k].name] = m;
  }
  try {
    return std::make_shared<const CompiledProgram>(compile_program(p, im, stored));
  } catch (const Error& e) {
    throw Error(e.code(), w + ": " + e.message(), e.node().empty() ? node : e.node());
  }
}

int64_t normalize_dim(int64_t dim, int64_t rank, const std::string& what, const std::string& node) {
  if (rank == 0) invalid_argument(what + ": a scanned operand must have at least one dimension", node);
  int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank) {
    invalid_argument(
        what + ": dim " + std::to_string(dim) + " is out of range for " + std::to_string(rank) + " dimensions", node);
  }
  return d;
}

TensorMeta remove_dim(TensorMeta m, int64_t dim) {
  m.shape.erase(m.shape.begin() + dim);
  m.wrapped_number = false;
  return m;
}

TensorMeta insert_dim(TensorMeta m, int64_t dim, int64_t n) {
  m.shape.insert(m.shape.begin() + dim, n);
  m.wrapped_number = false;
  return m;
}

// ---- host helpers for slicing and stacking along a dim (CPU tensors).

void require_host(const Tensor& t, const std::string& what, const std::string& node) {
  if (t.defined() && t.device().type != DeviceType::kCPU) {
    throw Error(ErrorCode::kUnsupported, what + " runs on CPU tensors only (for now)", node);
  }
}

struct Geometry {
  int64_t outer = 1, n = 0, inner_bytes = 0;
};

Geometry geometry(const Shape& shape, int64_t dim, DType dt) {
  Geometry g;
  for (int64_t i = 0; i < dim; ++i) g.outer *= shape[static_cast<size_t>(i)];
  g.n = shape[static_cast<size_t>(dim)];
  int64_t inner = 1;
  for (size_t i = static_cast<size_t>(dim) + 1; i < shape.size(); ++i) inner *= shape[i];
  g.inner_bytes = inner * static_cast<int64_t>(dtype_size(dt));
  return g;
}

// Slice i along the scanned dim of a tensor laid out as `g`: copied out of
// `whole` into the contiguous `slice`, or back.
void gather_slice(const Geometry& g, const void* whole, int64_t i, void* slice) {
  const char* src = static_cast<const char*>(whole);
  char* dst = static_cast<char*>(slice);
  for (int64_t o = 0; o < g.outer; ++o) {
    std::memcpy(dst + o * g.inner_bytes, src + (o * g.n + i) * g.inner_bytes, static_cast<size_t>(g.inner_bytes));
  }
}

void scatter_slice(const Geometry& g, const void* slice, void* whole, int64_t i) {
  const char* src = static_cast<const char*>(slice);
  char* dst = static_cast<char*>(whole);
  for (int64_t o = 0; o < g.outer; ++o) {
    std::memcpy(dst + (o * g.n + i) * g.inner_bytes, src + o * g.inner_bytes, static_cast<size_t>(g.inner_bytes));
  }
}

Tensor slice_at(const OpContext& ctx, const Tensor& x, int64_t dim, int64_t i) {
  Shape s = x.shape();
  s.erase(s.begin() + dim);
  Tensor out = ctx.empty(x.dtype(), s);
  gather_slice(geometry(x.shape(), dim, x.dtype()), x.data(), i, out.data());
  return out;
}

void put_at(Tensor& out, int64_t dim, int64_t i, const Tensor& y) {
  scatter_slice(geometry(out.shape(), dim, out.dtype()), y.data(), out.data(), i);
}

void check_iteration(const ExecOptions& opts, const std::string& what, int64_t iter, const std::string& node) {
  check_running(opts, std::chrono::steady_clock::now(), node,
                [&] { return "in " + what + " at iteration " + std::to_string(iter); });
}

std::vector<Tensor> run_body(const CompiledProgram& cp, const std::vector<Tensor>& args, const ExecOptions& opts,
                             const ControlFlowIO& io) {
  std::map<std::string, Tensor> in;
  for (size_t k = 0; k < cp.inputs.size(); ++k) in[cp.inputs[k].first] = args[k];
  ExecOptions o = opts;
  o.host_outputs = true;  // tested, sliced and stacked here
  if (io.read) o.stored_read = io.read;
  ExecResult r = execute_program(cp, in, o);
  if (io.write) {
    for (auto& [name, t] : r.stored_writes) io.write(name, std::move(t));
  }
  std::vector<Tensor> out;
  out.reserve(r.outputs.size());
  for (auto& [name, t] : r.outputs) out.push_back(std::move(t));
  return out;
}

bool read_bool(const Tensor& t) {
  return *static_cast<const uint8_t*>(t.data()) != 0;
}

// ---- associative_scan's parallel path.

std::atomic<bool> g_scan_parallel{true};

// Ops that act elementwise (with right-aligned broadcasting), so that a
// leading batch dim on operands of the output's rank batches them.
bool batch_safe_op(const std::string& op) {
  static const std::set<std::string> ok = {
      "add", "sub",  "mul",   "div",     "pow",         "maximum",    "minimum",     "to",   "eq",  "ne",
      "lt",  "le",   "gt",    "ge",      "logical_and", "logical_or", "where",       "neg",  "abs", "exp",
      "log", "sqrt", "rsqrt", "sigmoid", "tanh",        "relu",       "logical_not", "clamp"};
  return ok.count(op) != 0;
}

// Why combine_fn cannot run batched regardless of the batch size, or "".
std::string batch_blocker(const CompiledProgram& cp) {
  for (const auto& v : cp.values) {
    if (v.source == ValueInfo::Source::kStored) return "reads stored tensor '" + v.name + "'";
  }
  for (const auto& b : cp.nodes) {
    if (b.control) return "node '" + b.id + "' is control flow";
    if (!b.writes_stored.empty()) return "node '" + b.id + "' writes a stored tensor";
    if (!b.op || !batch_safe_op(b.op->name)) {
      return "node '" + b.id + "' (" + (b.op ? b.op->name : std::string("?")) + ") is not elementwise";
    }
  }
  return "";
}

// Checks that `bcp` (combine_fn compiled with a leading batch dim of m on
// every input) computes, row by row, what `cp` computes: every value that
// depends on an input is the unbatched one with m in front (same dtype),
// every other value is unchanged, and operands that depend on an input have
// their node's output rank (so the batch dims line up under broadcasting).
std::string check_batched(const CompiledProgram& cp, const CompiledProgram& bcp, int64_t m) {
  std::map<std::string, const BoundNode*> unbatched;
  for (const auto& b : cp.nodes) unbatched[b.id] = &b;
  std::vector<bool> dep(bcp.values.size(), false);
  for (const auto& [name, id] : bcp.inputs) dep[static_cast<size_t>(id)] = true;
  for (const auto& b : bcp.nodes) {
    auto it = unbatched.find(b.id);
    if (it == unbatched.end() || it->second->outputs.size() != b.outputs.size()) return "node '" + b.id + "' differs";
    bool any_dep = false;
    for (const auto& ps : b.tensor_params) {
      for (int v : ps) any_dep = any_dep || dep[static_cast<size_t>(v)];
    }
    for (size_t k = 0; k < b.outputs.size(); ++k) {
      const TensorMeta& bm = bcp.values[static_cast<size_t>(b.outputs[k])].meta;
      TensorMeta want = cp.values[static_cast<size_t>(it->second->outputs[k])].meta;
      if (any_dep) want.shape.insert(want.shape.begin(), m);
      if (bm.dtype != want.dtype || bm.shape != want.shape) {
        return "node '" + b.id + "' gives " + bm.str() + " batched, expected " + want.str();
      }
      dep[static_cast<size_t>(b.outputs[k])] = any_dep;
      for (const auto& ps : b.tensor_params) {
        for (int v : ps) {
          if (dep[static_cast<size_t>(v)] && bcp.values[static_cast<size_t>(v)].meta.dim() != bm.dim()) {
            return "node '" + b.id + "' broadcasts an input-dependent operand across the batch dim";
          }
        }
      }
    }
  }
  if (bcp.outputs.size() != cp.outputs.size()) return "the outputs differ";
  for (size_t k = 0; k < cp.outputs.size(); ++k) {
    const TensorMeta& bm = bcp.values[static_cast<size_t>(bcp.outputs[k].second)].meta;
    TensorMeta want = cp.values[static_cast<size_t>(cp.outputs[k].second)].meta;
    want.shape.insert(want.shape.begin(), m);
    if (!dep[static_cast<size_t>(bcp.outputs[k].second)] || bm.dtype != want.dtype || bm.shape != want.shape) {
      return "output " + std::to_string(k) + " is " + bm.str() + " batched, expected " + want.str() +
             " (from the inputs)";
    }
  }
  return "";
}

std::shared_ptr<const CompiledProgram> compile_batched(const ControlFlow& cf, int64_t m) {
  Program p = *cf.programs.at("combine_fn");
  std::map<std::string, TensorMeta> im;
  for (auto& in : p.inputs) {
    in.meta.shape.insert(in.meta.shape.begin(), m);
    in.meta.wrapped_number = false;
    im[in.name] = in.meta;
  }
  return std::make_shared<const CompiledProgram>(compile_program(p, im, nullptr));
}

// The batching of associative_scan node `cf` (combine_fn compiled, length
// known): the batched combine_fn variants for every Hillis-Steele level
// (batch sizes n - d for d = 1, 2, 4, ... < n), or none when combine_fn
// does not batch (then the sequential path runs).
std::shared_ptr<const ScanBatching> plan_scan_batching(const ControlFlow& cf) {
  auto s = std::make_shared<ScanBatching>();
  if (cf.length < 2) return s;
  const CompiledProgram& cp = *cf.bodies.at("combine_fn");
  s->why_not = batch_blocker(cp);
  if (!s->why_not.empty()) return s;
  for (int64_t d = 1; d < cf.length; d *= 2) {
    const int64_t m = cf.length - d;
    std::shared_ptr<const CompiledProgram> bcp;
    std::string why;
    try {
      bcp = compile_batched(cf, m);
      why = check_batched(cp, *bcp, m);
    } catch (const Error& e) {
      why = "does not compile batched: " + e.message();
    }
    if (!why.empty()) {
      s->levels.clear();
      s->why_not = why;
      return s;
    }
    s->levels.push_back(std::move(bcp));
  }
  return s;
}

// x (any layout, scanned along dim) -> (n, slice...) with row p the slice
// at logical position p (from the end when reversed); and back.
Tensor to_rows(const OpContext& ctx, const Tensor& x, int64_t dim, bool reverse) {
  Shape s = x.shape();
  const int64_t n = s[static_cast<size_t>(dim)];
  s.erase(s.begin() + dim);
  s.insert(s.begin(), n);
  Tensor out = ctx.empty(x.dtype(), s);
  Geometry g = geometry(x.shape(), dim, x.dtype());
  char* dst = static_cast<char*>(out.data());
  for (int64_t p = 0; p < g.n; ++p) {
    gather_slice(g, x.data(), reverse ? g.n - 1 - p : p, dst + p * g.outer * g.inner_bytes);
  }
  return out;
}

Tensor from_rows(const OpContext& ctx, const Tensor& rows, const Shape& shape, int64_t dim, bool reverse) {
  Tensor out = ctx.empty(rows.dtype(), shape);
  Geometry g = geometry(shape, dim, rows.dtype());
  const char* src = static_cast<const char*>(rows.data());
  for (int64_t p = 0; p < g.n; ++p) {
    scatter_slice(g, src + p * g.outer * g.inner_bytes, out.data(), reverse ? g.n - 1 - p : p);
  }
  return out;
}

// Rows [from, from + m) of a (n, slice...) tensor, as a view.
Tensor row_view(const Tensor& rows, int64_t from, int64_t m) {
  TensorMeta mt;
  mt.dtype = rows.dtype();
  mt.shape = rows.shape();
  mt.shape[0] = m;
  const size_t row_bytes = rows.shape()[0] == 0 ? 0 : rows.nbytes() / static_cast<size_t>(rows.shape()[0]);
  const size_t base =
      static_cast<size_t>(static_cast<const char*>(rows.data()) - static_cast<const char*>(rows.storage()->data()));
  return Tensor(mt, rows.storage(), base + static_cast<size_t>(from) * row_bytes);
}

// Hillis-Steele inclusive scan: for d = 1, 2, 4, ... < n, rows [d, n) become
// combine(rows [0, n-d), rows [d, n)), one batched combine_fn call per level;
// the earlier element is always the left operand, so the order of
// combination is kept (only its association differs from the sequential).
std::vector<Tensor> parallel_scan(const ControlFlow& cf, const std::vector<Tensor>& ops, const ExecOptions& opts,
                                  const ControlFlowIO& io, const std::string& w, const std::string& node) {
  const std::vector<std::shared_ptr<const CompiledProgram>>& levels = cf.batching->levels;
  const OpContext ctx = opts.ctx.for_host();  // slices and stacks in host memory; bodies place their own nodes
  const int64_t n = cf.length;
  std::vector<Tensor> rows;
  for (const auto& x : ops) rows.push_back(to_rows(ctx, x, cf.dim, cf.reverse));
  size_t level = 0;
  for (int64_t d = 1; d < n; d *= 2, ++level) {
    check_running(opts, std::chrono::steady_clock::now(), node, [&] {
      return "in " + w + " (parallel, level " + std::to_string(level) + ") at iteration " + std::to_string(d - 1);
    });
    const int64_t m = n - d;
    std::vector<Tensor> args;
    for (const auto& r : rows) args.push_back(row_view(r, 0, m));
    for (const auto& r : rows) args.push_back(row_view(r, d, m));
    std::vector<Tensor> out = run_body(*levels[level], args, opts, io);
    cf.batching->combine_calls.fetch_add(1, std::memory_order_relaxed);
    args.clear();
    for (size_t k = 0; k < rows.size(); ++k) {
      require_host(out[k], w, node);
      if (out[k].nbytes() != row_view(rows[k], d, m).nbytes()) {
        throw Error(ErrorCode::kInternal, w + ": batched combine_fn returned " + out[k].meta().str(), node);
      }
      // memmove: an output may be one of the input views (an identity).
      std::memmove(row_view(rows[k], d, m).data(), out[k].data(), out[k].nbytes());
    }
  }
  std::vector<Tensor> res;
  for (size_t k = 0; k < ops.size(); ++k) res.push_back(from_rows(ctx, rows[k], ops[k].shape(), cf.dim, cf.reverse));
  return res;
}

}  // namespace

void check_control_running(const ExecOptions& opts, const ControlFlow& cf, int64_t iter, const std::string& node) {
  check_iteration(opts, where(cf, node), iter, node);
}

void throw_past_max_iters(const ControlFlow& cf, const std::string& node) {
  throw Error(ErrorCode::kDeadlineExceeded,
              where(cf, node) + ": still running after max_iters=" + std::to_string(cf.max_iters) + " iterations",
              node);
}

void set_associative_scan_parallel(bool on) {
  g_scan_parallel.store(on, std::memory_order_relaxed);
}
bool associative_scan_parallel() {
  return g_scan_parallel.load(std::memory_order_relaxed);
}

bool is_control_flow_op(const std::string& op) {
  return op == "cond" || op == "while_loop" || op == "scan" || op == "map" || op == "associative_scan";
}

const OpDef* control_flow_op_def(const std::string& op) {
  static const std::map<std::string, OpDef> defs = [] {
    std::map<std::string, OpDef> m;
    for (const char* n : {"cond", "while_loop", "scan", "map", "associative_scan"}) {
      OpDef d;
      d.name = n;
      d.doc = "control flow (API.md 4.2)";
      ParamSpec ps;
      ps.name = "operands";
      ps.kind = ParamKind::kTensorList;
      d.params.push_back(ps);
      d.dtypes = "all";
      m.emplace(n, std::move(d));
    }
    return m;
  }();
  auto it = defs.find(op);
  return it == defs.end() ? nullptr : &it->second;
}

std::shared_ptr<const ControlFlow> parse_control_flow(const Node& n, std::vector<ArgExpr>* operands) {
  auto cf = std::make_shared<ControlFlow>();
  std::vector<std::string> keys;
  if (n.op == "cond") {
    cf->kind = ControlKind::kCond;
    keys = {"then", "else"};
  } else if (n.op == "while_loop") {
    cf->kind = ControlKind::kWhileLoop;
    keys = {"cond", "body"};
  } else if (n.op == "scan") {
    cf->kind = ControlKind::kScan;
    keys = {"body"};
  } else if (n.op == "map") {
    cf->kind = ControlKind::kMap;
    keys = {"body"};
  } else if (n.op == "associative_scan") {
    cf->kind = ControlKind::kAssociativeScan;
    keys = {"combine_fn"};
  } else {
    throw Error(ErrorCode::kInternal, "not a control-flow op: " + n.op, n.id);
  }
  const std::string w = where(*cf, n.id);
  for (const auto& k : keys) {
    auto it = n.subprograms.find(k);
    if (it == n.subprograms.end() || !it->second) invalid_program(w + " needs a \"" + k + "\" subprogram", n.id);
    if (it->second->inputs.empty() && cf->kind != ControlKind::kCond) {
      invalid_program(w + ": subprogram \"" + k + "\" must declare its inputs", n.id);
    }
    cf->programs[k] = it->second;
  }
  for (const auto& [k, p] : n.subprograms) {
    if (!cf->programs.count(k)) invalid_program(w + " takes no \"" + k + "\" subprogram", n.id);
  }

  // Operands.
  switch (cf->kind) {
    case ControlKind::kCond: {
      if (n.args.empty()) invalid_argument(w + ": missing the predicate", n.id);
      if (n.args[0].kind == ArgExpr::Kind::kStringList) invalid_argument(w + ": pred must be one bool tensor", n.id);
      for (const auto& a : n.args) flatten_arg(a, w, n.id, operands);
      break;
    }
    case ControlKind::kWhileLoop:
      for (const auto& a : n.args) flatten_arg(a, w, n.id, operands);
      if (operands->empty()) invalid_argument(w + ": needs at least one carried value", n.id);
      break;
    case ControlKind::kScan:
      if (n.args.size() != 2) invalid_argument(w + ": expects two args, init and xs (names or lists of names)", n.id);
      cf->n_carry = flatten_arg(n.args[0], w, n.id, operands);
      cf->n_sliced = flatten_arg(n.args[1], w, n.id, operands);
      break;
    case ControlKind::kMap:
      if (n.args.empty()) invalid_argument(w + ": missing xs", n.id);
      cf->n_sliced = flatten_arg(n.args[0], w, n.id, operands);
      for (size_t i = 1; i < n.args.size(); ++i) flatten_arg(n.args[i], w, n.id, operands);
      break;
    case ControlKind::kAssociativeScan:
      if (n.args.size() != 1) invalid_argument(w + ": expects one arg, xs (a name or a list of names)", n.id);
      cf->n_sliced = flatten_arg(n.args[0], w, n.id, operands);
      break;
  }
  if ((cf->kind == ControlKind::kScan || cf->kind == ControlKind::kMap || cf->kind == ControlKind::kAssociativeScan) &&
      cf->n_sliced == 0) {
    invalid_argument(w + ": xs may not be empty", n.id);
  }

  // Kwargs.
  for (const auto& [k, a] : n.kwargs) {
    const bool lit = a.kind == ArgExpr::Kind::kLiteral;
    const bool scan_like = cf->kind == ControlKind::kScan || cf->kind == ControlKind::kAssociativeScan;
    if (k == "dim" && scan_like) {
      if (!lit || !a.literal.is_int()) invalid_argument(w + ": dim must be an int", n.id);
      cf->dim = a.literal.to_int("dim");
    } else if (k == "reverse" && scan_like) {
      if (!lit || !a.literal.is_bool()) invalid_argument(w + ": reverse must be a bool", n.id);
      cf->reverse = a.literal.to_bool("reverse");
    } else if (k == "combine_mode" && cf->kind == ControlKind::kAssociativeScan) {
      if (a.kind != ArgExpr::Kind::kString || (a.str != "generic" && a.str != "pointwise")) {
        invalid_argument(w + ": combine_mode must be \"generic\" or \"pointwise\"", n.id);
      }
    } else if (k == "max_iters" && cf->kind == ControlKind::kWhileLoop) {
      if (!lit || !a.literal.is_int() || a.literal.to_int("max_iters") < 0) {
        invalid_argument(w + ": max_iters must be a non-negative int", n.id);
      }
      cf->max_iters = a.literal.to_int("max_iters");
    } else {
      invalid_argument(w + ": unexpected keyword argument '" + k + "'", n.id);
    }
  }
  return cf;
}

std::vector<TensorMeta> infer_control_flow(BoundNode& b, const std::vector<TensorMeta>& ops,
                                           const StoredLookup& stored) {
  auto cf = std::make_shared<ControlFlow>(*b.control);
  const std::string& node = b.id;
  const std::string w = where(*cf, node);
  std::vector<TensorMeta> res;
  switch (cf->kind) {
    case ControlKind::kCond: {
      if (!is_bool_scalar(ops[0])) {
        invalid_argument(w + ": pred must be a bool scalar tensor, got " + ops[0].str(), node);
      }
      std::vector<TensorMeta> args(ops.begin() + 1, ops.end());
      cf->bodies["then"] = compile_body(*cf, "then", args, node, stored);
      cf->bodies["else"] = compile_body(*cf, "else", args, node, stored);
      auto t = output_metas(*cf->bodies["then"]);
      auto e = output_metas(*cf->bodies["else"]);
      if (!same_metas(t, e)) {
        invalid_program(w + ": then and else must return the same shapes and dtypes: then returns " + metas_str(t) +
                            ", else returns " + metas_str(e),
                        node);
      }
      res = t;
      break;
    }
    case ControlKind::kWhileLoop: {
      cf->bodies["cond"] = compile_body(*cf, "cond", ops, node, stored);
      cf->bodies["body"] = compile_body(*cf, "body", ops, node, stored);
      auto c = output_metas(*cf->bodies["cond"]);
      if (c.size() != 1 || !is_bool_scalar(c[0])) {
        invalid_program(w + ": cond must return one bool scalar, returns " + metas_str(c), node);
      }
      auto o = output_metas(*cf->bodies["body"]);
      std::vector<TensorMeta> carries(ops);
      for (auto& m : carries) m.wrapped_number = false;
      if (!same_metas(o, carries)) {
        invalid_program(
            w + ": body must return the carries' shapes and dtypes " + metas_str(carries) + ", returns " + metas_str(o),
            node);
      }
      res = carries;
      break;
    }
    case ControlKind::kScan:
    case ControlKind::kMap:
    case ControlKind::kAssociativeScan: {
      const size_t first = cf->kind == ControlKind::kScan ? cf->n_carry : 0;
      const TensorMeta& x0 = ops[first];
      cf->dim = cf->kind == ControlKind::kMap ? normalize_dim(0, x0.dim(), w, node)
                                              : normalize_dim(cf->dim, x0.dim(), w, node);
      cf->length = x0.shape[static_cast<size_t>(cf->dim)];
      std::vector<TensorMeta> slices;
      for (size_t k = first; k < first + cf->n_sliced; ++k) {
        if (ops[k].dim() != x0.dim() || ops[k].shape[static_cast<size_t>(cf->dim)] != cf->length) {
          throw Error(ErrorCode::kShapeMismatch,
                      w + ": every xs must have the same size along dim " + std::to_string(cf->dim) + ": " + x0.str() +
                          " and " + ops[k].str(),
                      node);
        }
        slices.push_back(remove_dim(ops[k], cf->dim));
      }
      if (cf->kind == ControlKind::kAssociativeScan) {
        std::vector<TensorMeta> args(slices);
        args.insert(args.end(), slices.begin(), slices.end());
        cf->bodies["combine_fn"] = compile_body(*cf, "combine_fn", args, node, stored);
        auto o = output_metas(*cf->bodies["combine_fn"]);
        if (!same_metas(o, slices)) {
          invalid_program(w + ": combine_fn must return " + metas_str(slices) + ", returns " + metas_str(o), node);
        }
        cf->batching = plan_scan_batching(*cf);
        for (size_t k = 0; k < cf->n_sliced; ++k) {
          TensorMeta m = ops[k];
          m.wrapped_number = false;
          res.push_back(m);
        }
        break;
      }
      std::vector<TensorMeta> args;
      size_t n_ys_from = 0;
      if (cf->kind == ControlKind::kScan) {
        args.assign(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(cf->n_carry));
        for (auto& m : args) m.wrapped_number = false;
        args.insert(args.end(), slices.begin(), slices.end());
        n_ys_from = cf->n_carry;
      } else {
        args = slices;
        args.insert(args.end(), ops.begin() + static_cast<std::ptrdiff_t>(cf->n_sliced), ops.end());
      }
      cf->bodies["body"] = compile_body(*cf, "body", args, node, stored);
      auto o = output_metas(*cf->bodies["body"]);
      if (cf->kind == ControlKind::kScan) {
        std::vector<TensorMeta> carries(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(cf->n_carry));
        std::vector<TensorMeta> got(o.begin(),
                                    o.begin() + static_cast<std::ptrdiff_t>(std::min(o.size(), cf->n_carry)));
        if (!same_metas(got, carries)) {
          invalid_program(
              w + ": body must return the carries " + metas_str(carries) + " first, returns " + metas_str(o), node);
        }
        res = carries;
      }
      for (size_t k = n_ys_from; k < o.size(); ++k) {
        if (cf->dim > o[k].dim()) {
          invalid_program(w + ": body output " + std::to_string(k) + " " + o[k].str() +
                              " cannot be stacked along dim " + std::to_string(cf->dim),
                          node);
        }
        res.push_back(insert_dim(o[k], cf->dim, cf->length));
      }
      break;
    }
  }
  b.control = cf;
  return res;
}

std::vector<Tensor> run_control_flow(const BoundNode& b, const std::vector<Tensor>& ops, const ExecOptions& opts,
                                     const ControlFlowIO& io) {
  const ControlFlow& cf = *b.control;
  const std::string& node = b.id;
  const std::string w = where(cf, node);
  for (const auto& t : ops) require_host(t, w, node);
  const OpContext ctx = opts.ctx.for_host();  // slices and stacks in host memory; bodies place their own nodes
  switch (cf.kind) {
    case ControlKind::kCond: {
      std::vector<Tensor> args(ops.begin() + 1, ops.end());
      return run_body(*cf.bodies.at(read_bool(ops[0]) ? "then" : "else"), args, opts, io);
    }
    case ControlKind::kWhileLoop: {
      std::vector<Tensor> carries = ops;
      const CompiledProgram& cond = *cf.bodies.at("cond");
      const CompiledProgram& body = *cf.bodies.at("body");
      for (int64_t it = 0;; ++it) {
        check_iteration(opts, w, it, node);
        std::vector<Tensor> c = run_body(cond, carries, opts, io);
        if (!read_bool(c.at(0))) break;
        if (it >= cf.max_iters) throw_past_max_iters(cf, node);
        carries = run_body(body, carries, opts, io);
      }
      return carries;
    }
    case ControlKind::kScan:
    case ControlKind::kMap: {
      const bool scan = cf.kind == ControlKind::kScan;
      const size_t first = scan ? cf.n_carry : 0;
      const CompiledProgram& body = *cf.bodies.at("body");
      std::vector<Tensor> carries(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(first));
      std::vector<Tensor> extras(ops.begin() + static_cast<std::ptrdiff_t>(first + cf.n_sliced), ops.end());
      const auto outs = output_metas(body);
      std::vector<Tensor> ys;
      for (size_t k = first; k < outs.size(); ++k) {
        ys.push_back(ctx.empty(outs[k].dtype, insert_dim(outs[k], cf.dim, cf.length).shape));
      }
      for (int64_t step = 0; step < cf.length; ++step) {
        check_iteration(opts, w, step, node);
        const int64_t i = cf.reverse ? cf.length - 1 - step : step;
        std::vector<Tensor> args = carries;
        for (size_t k = first; k < first + cf.n_sliced; ++k) args.push_back(slice_at(ctx, ops[k], cf.dim, i));
        args.insert(args.end(), extras.begin(), extras.end());
        std::vector<Tensor> o = run_body(body, args, opts, io);
        for (size_t k = 0; k < first; ++k) carries[k] = o[k];
        for (size_t k = first; k < o.size(); ++k) {
          require_host(o[k], w, node);
          put_at(ys[k - first], cf.dim, i, o[k]);
        }
      }
      std::vector<Tensor> res = std::move(carries);
      res.insert(res.end(), ys.begin(), ys.end());
      return res;
    }
    case ControlKind::kAssociativeScan: {
      // Inclusive scan: r[i] = combine(r[i-1], x[i]) (reverse: from the end).
      if (cf.batching && !cf.batching->levels.empty() && associative_scan_parallel()) {
        cf.batching->parallel_runs.fetch_add(1, std::memory_order_relaxed);
        return parallel_scan(cf, ops, opts, io, w, node);
      }
      // Sequential: the combine_fn is a subprogram over slices.
      if (cf.batching) cf.batching->sequential_runs.fetch_add(1, std::memory_order_relaxed);
      const CompiledProgram& fn = *cf.bodies.at("combine_fn");
      std::vector<Tensor> res;
      for (const auto& x : ops) res.push_back(ctx.empty(x.dtype(), x.shape()));
      std::vector<Tensor> acc;
      for (int64_t step = 0; step < cf.length; ++step) {
        check_iteration(opts, w, step, node);
        const int64_t i = cf.reverse ? cf.length - 1 - step : step;
        std::vector<Tensor> xi;
        for (const auto& x : ops) xi.push_back(slice_at(ctx, x, cf.dim, i));
        if (step == 0) {
          acc = std::move(xi);
        } else {
          std::vector<Tensor> args = acc;
          args.insert(args.end(), xi.begin(), xi.end());
          acc = run_body(fn, args, opts, io);
          if (cf.batching) cf.batching->combine_calls.fetch_add(1, std::memory_order_relaxed);
        }
        for (size_t k = 0; k < res.size(); ++k) {
          require_host(acc[k], w, node);
          put_at(res[k], cf.dim, i, acc[k]);
        }
      }
      return res;
    }
  }
  return {};
}

}  // namespace tensord
