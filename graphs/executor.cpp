#include "graphs/executor.h"

#include <climits>

#include "graphs/control_flow_run.h"
#include "graphs/device_placement.h"
#include "graphs/node_runner.h"
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
  NodeRunner runner(cp, opts);
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
    runner.before(b);
    // Control flow reads predicates and slices on the host; its bodies
    // place their own nodes.
    bool host = true;
    const KernelFn* kernel = b.control ? nullptr : place.kernel(b, cp, &host);
    if (!b.control && !kernel) {
      throw NodeRunner::unsupported(opts.ctx.backend ? opts.ctx.backend->name() : "cpu", b);
    }
    OpArgs<Tensor> args = bind_node_args<Tensor>(b, [&placed, host](size_t v) { return placed(v, host); });
    std::vector<Tensor> out = NodeRunner::call(b, [&] {
      if (b.control) return execute_control_flow(b, args.tensors[0], opts, pending);
      return (*kernel)(host && place.active() ? place.host_ctx(&pending) : ctx, args);
    });
    runner.check_results(b, out);
    for (size_t k = 0; k < b.outputs.size(); ++k) vals[static_cast<size_t>(b.outputs[k])] = out[k];
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
    runner.after(b, runner.ran_on(host));
  }
  for (const auto& [name, id] : cp.outputs) {
    const Tensor& t = vals[static_cast<size_t>(id)];
    res.outputs.emplace_back(name, opts.host_outputs ? place.place(SIZE_MAX, t, true) : t);
  }
  res.stored_writes = pending.take();
  return res;
}

std::vector<Tensor> execute_control_flow(const BoundNode& b, const std::vector<Tensor>& operands,
                                         const ExecOptions& opts, PendingStore& pending) {
  return run_control_flow(b, operands, opts,
                          [&opts, &pending](const CompiledProgram& body, const std::vector<Tensor>& args) {
                            std::map<std::string, Tensor> in;
                            for (size_t k = 0; k < body.inputs.size(); ++k) in[body.inputs[k].first] = args[k];
                            ExecOptions o = opts;
                            o.host_outputs = true;  // tested, sliced and stacked by the node
                            o.stored_read = [&pending](const std::string& n) { return pending.read(n); };
                            ExecResult r = execute_program(body, in, o);
                            for (auto& [name, t] : r.stored_writes) pending.write(name, std::move(t));
                            std::vector<Tensor> outs;
                            outs.reserve(r.outputs.size());
                            for (auto& [name, t] : r.outputs) outs.push_back(std::move(t));
                            return outs;
                          });
}

}  // namespace tensord
