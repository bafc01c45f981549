#include "graphs/executor.h"

#include <climits>

#include "graphs/control_flow.h"
#include "graphs/device_placement.h"
#include "graphs/pending_store.h"
#include "ops/backend.h"
#include "ops/error.h"

namespace tensord {

ExecResult execute_program(const CompiledProgram& cp, const std::map<std::string, Tensor>& inputs,
                           const ExecOptions& opts) {
  std::vector<Tensor> vals(cp.values.size());
  for (size_t i = 0; i < cp.values.size(); ++i) {
    if (cp.constants[i].defined()) vals[i] = cp.constants[i];
  }
  for (const auto& [name, id] : cp.inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end()) throw Error(ErrorCode::kBadRequest, "missing input '" + name + "'");
    const TensorMeta& want = cp.values[static_cast<size_t>(id)].meta;
    if (it->second.dtype() != want.dtype || it->second.shape() != want.shape) {
      throw Error(ErrorCode::kConflict,
                  "input '" + name + "' is " + it->second.meta().str() + ", expected " + want.str());
    }
    vals[static_cast<size_t>(id)] = it->second;
  }

  ExecResult res;
  PendingStore pending(opts.stored_read);
  OpContext ctx = opts.ctx;
  ctx.stored = &pending;
  DevicePlacement place(ctx, cp.values.size());
  std::vector<bool> relocated(place.active() ? cp.values.size() : 0);
  // Binds value v where the node's kernel runs; a stored tensor's first
  // copy to the device is kept for the caller (ExecResult::relocated).
  auto placed = [&](size_t v, bool host) {
    Tensor t = place.place(v, vals[v], host);
    const ValueInfo& vi = cp.values[v];
    if (!host && vi.source == ValueInfo::Source::kStored && !relocated[v] && t.defined() &&
        t.storage() != vals[v].storage()) {
      relocated[v] = true;
      res.relocated.push_back({vi.name, vals[v], t});
    }
    return t;
  };
  for (size_t i = 0; i < cp.nodes.size(); ++i) {
    const BoundNode& b = cp.nodes[i];
    if (opts.cancelled && opts.cancelled->load(std::memory_order_relaxed)) {
      throw Error(ErrorCode::kCancelled, "job cancelled before node '" + b.id + "'", b.id);
    }
    if (std::chrono::steady_clock::now() > opts.deadline) {
      throw Error(ErrorCode::kDeadlineExceeded, "deadline exceeded before node '" + b.id + "'", b.id);
    }
    // Control flow reads predicates and slices on the host; its bodies
    // place their own nodes.
    bool host = true;
    const KernelFn* kernel = b.control ? nullptr : place.kernel(b, cp, &host);
    if (!b.control && !kernel) {
      throw Error(ErrorCode::kUnsupported,
                  "backend " + std::string(opts.ctx.backend ? opts.ctx.backend->name() : "cpu") + " does not support " +
                      b.op->name,
                  b.id);
    }
    OpArgs<Tensor> args = bind_node_args<Tensor>(b, [&placed, host](size_t v) { return placed(v, host); });
    auto t0 = std::chrono::steady_clock::now();
    std::vector<Tensor> out;
    try {
      if (b.control) {
        ControlFlowIO io{[&pending](const std::string& n) { return pending.read(n); },
                         [&pending](const std::string& n, Tensor t) { pending.write(n, std::move(t)); }};
        out = run_control_flow(b, args.tensors[0], opts, io);
      } else {
        out = (*kernel)(host && place.active() ? place.host_ctx(&pending) : ctx, args);
      }
    } catch (const Error& e) {
      throw e.with_node(b.id);
    } catch (const std::bad_alloc&) {
      throw Error(ErrorCode::kQuotaExceeded, b.op->name + ": out of memory", b.id);
    }
    const auto t_end = std::chrono::steady_clock::now();
    double secs = std::chrono::duration<double>(t_end - t0).count();
    if (out.size() < b.outputs.size())
      throw Error(ErrorCode::kInternal, b.op->name + ": kernel returned too few outputs", b.id);
    for (size_t k = 0; k < b.outputs.size(); ++k) {
      const TensorMeta& want = cp.values[static_cast<size_t>(b.outputs[k])].meta;
      if (out[k].dtype() != want.dtype || out[k].shape() != want.shape) {
        throw Error(ErrorCode::kInternal,
                    b.op->name + ": kernel result " + out[k].meta().str() + " differs from inferred " + want.str(),
                    b.id);
      }
      out[k].set_wrapped_number(false);
      vals[static_cast<size_t>(b.outputs[k])] = out[k];
    }
    if (!b.writes_stored.empty()) pending.write(b.writes_stored, out.at(0));
    // Release inputs whose last use was this node (the memory plan).
    for (const auto& ids : b.tensor_params) {
      for (int v : ids) {
        const ValueInfo& vi = cp.values[static_cast<size_t>(v)];
        if (vi.last_use == static_cast<int>(i)) place.forget(static_cast<size_t>(v));
        if (vi.last_use == static_cast<int>(i) && vi.source == ValueInfo::Source::kNode)
          vals[static_cast<size_t>(v)] = Tensor();
      }
    }
    for (int v : b.outputs) {
      place.forget(static_cast<size_t>(v));
      if (cp.values[static_cast<size_t>(v)].last_use < 0) vals[static_cast<size_t>(v)] = Tensor();
    }
    if (opts.on_node) opts.on_node(cp, b, secs, t_end);
  }
  for (const auto& [name, id] : cp.outputs) {
    const Tensor& t = vals[static_cast<size_t>(id)];
    res.outputs.emplace_back(name, opts.host_outputs ? place.place(SIZE_MAX, t, true) : t);
  }
  res.stored_writes = pending.take();
  return res;
}

}  // namespace tensord
