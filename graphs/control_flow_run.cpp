// The run half of control flow (graphs/control_flow_run.h): cond, while_loop,
// scan, map and associative_scan (sequential, or Hillis-Steele over the
// batched combine_fn variants the compile half made: graphs/scan_batching.h).
#include "graphs/control_flow_run.h"

#include <chrono>
#include <cstring>

#include "graphs/node_runner.h"
#include "ops/error.h"

namespace tensord {
namespace {

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

bool read_bool(const Tensor& t) {
  return *static_cast<const uint8_t*>(t.data()) != 0;
}

// ---- associative_scan's parallel path.

std::atomic<bool> g_scan_parallel{true};

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
                                  const BodyRunner& run_body, const std::string& w, const std::string& node) {
  const std::vector<std::shared_ptr<const CompiledProgram>>& levels = cf.batching->levels;
  const OpContext ctx = opts.ctx.for_host();  // slices and stacks in host memory; bodies place their own nodes
  const int64_t n = cf.length;
  std::vector<Tensor> rows;
  rows.reserve(ops.size());
  for (const auto& x : ops) rows.push_back(to_rows(ctx, x, cf.dim, cf.reverse));
  size_t level = 0;
  for (int64_t d = 1; d < n; d *= 2, ++level) {
    check_running(opts, std::chrono::steady_clock::now(), node, [&] {
      return "in " + w + " (parallel, level " + std::to_string(level) + ") at iteration " + std::to_string(d - 1);
    });
    const int64_t m = n - d;
    std::vector<Tensor> args;
    args.reserve(2 * rows.size());
    for (const auto& r : rows) args.push_back(row_view(r, 0, m));
    for (const auto& r : rows) args.push_back(row_view(r, d, m));
    std::vector<Tensor> out = run_body(*levels[level], args);
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
  check_iteration(opts, control_flow_label(cf, node), iter, node);
}

void throw_past_max_iters(const ControlFlow& cf, const std::string& node) {
  throw Error(
      ErrorCode::kDeadlineExceeded,
      control_flow_label(cf, node) + ": still running after max_iters=" + std::to_string(cf.max_iters) + " iterations",
      node);
}

void set_associative_scan_parallel(bool on) {
  g_scan_parallel.store(on, std::memory_order_relaxed);
}
bool associative_scan_parallel() {
  return g_scan_parallel.load(std::memory_order_relaxed);
}

std::vector<Tensor> run_control_flow(const BoundNode& b, const std::vector<Tensor>& ops, const ExecOptions& opts,
                                     const BodyRunner& run_body) {
  const ControlFlow& cf = *b.control;
  const std::string& node = b.id;
  const std::string w = control_flow_label(cf, node);
  for (const auto& t : ops) require_host(t, w, node);
  const OpContext ctx = opts.ctx.for_host();  // slices and stacks in host memory; bodies place their own nodes
  switch (cf.kind) {
    case ControlKind::kCond: {
      std::vector<Tensor> args(ops.begin() + 1, ops.end());
      return run_body(*cf.bodies.at(read_bool(ops[0]) ? "then" : "else"), args);
    }
    case ControlKind::kWhileLoop: {
      std::vector<Tensor> carries = ops;
      const CompiledProgram& cond = *cf.bodies.at("cond");
      const CompiledProgram& body = *cf.bodies.at("body");
      for (int64_t it = 0;; ++it) {
        check_iteration(opts, w, it, node);
        std::vector<Tensor> c = run_body(cond, carries);
        if (!read_bool(c.at(0))) break;
        if (it >= cf.max_iters) throw_past_max_iters(cf, node);
        carries = run_body(body, carries);
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
      std::vector<Tensor> ys;
      for (size_t k = first; k < body.outputs.size(); ++k) {
        const TensorMeta& y = body.values[static_cast<size_t>(body.outputs[k].second)].meta;
        Shape stacked = y.shape;
        stacked.insert(stacked.begin() + cf.dim, cf.length);
        ys.push_back(ctx.empty(y.dtype, std::move(stacked)));
      }
      for (int64_t step = 0; step < cf.length; ++step) {
        check_iteration(opts, w, step, node);
        const int64_t i = cf.reverse ? cf.length - 1 - step : step;
        std::vector<Tensor> args = carries;
        for (size_t k = first; k < first + cf.n_sliced; ++k) args.push_back(slice_at(ctx, ops[k], cf.dim, i));
        args.insert(args.end(), extras.begin(), extras.end());
        std::vector<Tensor> o = run_body(body, args);
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
        return parallel_scan(cf, ops, opts, run_body, w, node);
      }
      // Sequential: the combine_fn is a subprogram over slices.
      if (cf.batching) cf.batching->sequential_runs.fetch_add(1, std::memory_order_relaxed);
      const CompiledProgram& fn = *cf.bodies.at("combine_fn");
      std::vector<Tensor> res;
      res.reserve(ops.size());
      for (const auto& x : ops) res.push_back(ctx.empty(x.dtype(), x.shape()));
      std::vector<Tensor> acc;
      for (int64_t step = 0; step < cf.length; ++step) {
        check_iteration(opts, w, step, node);
        const int64_t i = cf.reverse ? cf.length - 1 - step : step;
        std::vector<Tensor> xi;
        xi.reserve(ops.size());
        for (const auto& x : ops) xi.push_back(slice_at(ctx, x, cf.dim, i));
        if (step == 0) {
          acc = std::move(xi);
        } else {
          std::vector<Tensor> args = acc;
          args.insert(args.end(), xi.begin(), xi.end());
          acc = run_body(fn, args);
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
