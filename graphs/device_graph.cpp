#include "graphs/device_graph.h"

#include <cstdint>

#include "graphs/control_flow_run.h"
#include "graphs/node_runner.h"
#include "ops/backend.h"
#include "ops/error.h"
#include "ops/graph_hooks.h"

namespace tensord {

// The buffers of one program instance (the root, or a subprogram where a
// conditional node captures it), and of its control nodes' subprograms.
struct DeviceGraph::Frame {
  const CompiledProgram* cp = nullptr;
  std::vector<Tensor> vals;  // per value id
  struct Control {
    // cond: then, else; while_loop: cond before the loop, body, cond in the body.
    std::vector<std::unique_ptr<Frame>> bodies;
    std::vector<Tensor> staging;  // while_loop: the body's results, before they become the carries
    Tensor loop_state;            // while_loop: kLoopStateBytes
  };
  std::map<size_t, Control> control;  // by node index
};

namespace {

bool op_capturable(const BoundNode& b, const CompiledProgram& cp, std::string_view backend, bool collectives) {
  const OpDef& op = *b.op;
  if (!op.capture_safe.count(backend) || (op.collective && !collectives)) return false;
  if (op.mutates >= 0 || !b.writes_stored.empty() || b.outputs.size() != 1) return false;
  return kernel_takes(b, cp, backend);
}

const std::vector<int>& operands(const BoundNode& b) {
  return b.tensor_params.at(0);
}

}  // namespace

bool DeviceGraph::capturable(const CompiledProgram& cp, std::string_view backend, bool collectives) {
  for (const BoundNode& b : cp.nodes) {
    if (!b.control) {
      if (!op_capturable(b, cp, backend, collectives)) return false;
      continue;
    }
    // Bodies take no collectives (`collectives` stays false below).
    const ControlFlow& cf = *b.control;
    if (cf.kind == ControlKind::kCond) {
      if (!capturable(*cf.bodies.at("then"), backend) || !capturable(*cf.bodies.at("else"), backend)) return false;
    } else if (cf.kind == ControlKind::kWhileLoop) {
      if (cf.max_iters < 1) return false;
      if (!capturable(*cf.bodies.at("cond"), backend) || !capturable(*cf.bodies.at("body"), backend)) return false;
    } else {
      return false;  // scan, map, associative_scan: the executor's path
    }
  }
  return true;
}

DeviceGraph::DeviceGraph(std::shared_ptr<const CompiledProgram> cp, Backend* backend, Device device,
                         std::shared_ptr<MemoryAccount> account)
    : cp_(std::move(cp)), backend_(backend), device_(device), account_(std::move(account)) {
  TENSORD_ASSERT(backend_ && capturable(*cp_, backend_->name(), true));
  root_ = make_frame(*cp_, {});
}

DeviceGraph::~DeviceGraph() = default;

Tensor DeviceGraph::buffer(const TensorMeta& m) {
  Tensor t = Tensor::empty(backend_, device_, m, account_);
  bytes_ += static_cast<int64_t>(t.nbytes());
  return t;
}

std::unique_ptr<DeviceGraph::Frame> DeviceGraph::make_frame(const CompiledProgram& cp,
                                                            const std::vector<Tensor>& inputs) {
  auto f = std::make_unique<Frame>();
  f->cp = &cp;
  f->vals.resize(cp.values.size());
  for (size_t v = 0; v < cp.values.size(); ++v) {
    const Tensor& c = cp.constants[v];
    if (!c.defined()) continue;
    if (c.meta().wrapped_number && c.on_host()) {
      f->vals[v] = c;  // a launch argument
    } else {
      f->vals[v] = c.to_device(backend_, device_, account_);
      bytes_ += static_cast<int64_t>(c.nbytes());
    }
  }
  for (size_t k = 0; k < cp.inputs.size(); ++k) {
    const size_t id = static_cast<size_t>(cp.inputs[k].second);
    f->vals[id] = inputs.empty() ? buffer(cp.values[id].meta) : inputs.at(k);
  }
  for (size_t i = 0; i < cp.nodes.size(); ++i) {
    const BoundNode& b = cp.nodes[i];
    for (int v : b.outputs) f->vals[static_cast<size_t>(v)] = buffer(cp.values[static_cast<size_t>(v)].meta);
    if (!b.control) continue;
    const ControlFlow& cf = *b.control;
    Frame::Control& ctl = f->control[i];
    std::vector<Tensor> ops;
    for (int v : operands(b)) ops.push_back(f->vals[static_cast<size_t>(v)]);
    if (cf.kind == ControlKind::kCond) {
      const std::vector<Tensor> args(ops.begin() + 1, ops.end());
      ctl.bodies.push_back(make_frame(*cf.bodies.at("then"), args));
      ctl.bodies.push_back(make_frame(*cf.bodies.at("else"), args));
    } else {
      std::vector<Tensor> carries;
      for (int v : b.outputs) carries.push_back(f->vals[static_cast<size_t>(v)]);
      for (const Tensor& c : carries) ctl.staging.push_back(buffer(c.meta()));
      ctl.bodies.push_back(make_frame(*cf.bodies.at("cond"), carries));
      ctl.bodies.push_back(make_frame(*cf.bodies.at("body"), carries));
      ctl.bodies.push_back(make_frame(*cf.bodies.at("cond"), carries));
      ctl.loop_state = buffer(TensorMeta{DType::kUInt8, {static_cast<int64_t>(kLoopStateBytes)}});
      loops_.emplace_back(&b, ctl.loop_state);
    }
  }
  return f;
}

void DeviceGraph::copy(const OpContext& ctx, const Tensor& dst, const Tensor& src) {
  if (dst.data() == src.data() || dst.nbytes() == 0) return;
  backend_->copy_on_device(ctx.stream, dst.data(), src.data(), dst.nbytes());
}

void DeviceGraph::capture(const Frame& f, const OpContext& ctx) {
  const CompiledProgram& cp = *f.cp;
  for (size_t i = 0; i < cp.nodes.size(); ++i) {
    const BoundNode& b = cp.nodes[i];
    if (b.control) {
      if (b.control->kind == ControlKind::kCond) {
        capture_cond(f, i, ctx);
      } else {
        capture_while(f, i, ctx);
      }
      continue;
    }
    const Tensor& slot = f.vals[static_cast<size_t>(b.outputs[0])];
    OutputSlots slots{&slot, 1, 0};
    OpContext c = ctx;
    GraphHooks hooks;
    hooks.out_slots = &slots;
    hooks.capture = CapturePhase::kRecord;
    hooks.captured_work = &work_;
    c.graph = &hooks;
    c.stored = nullptr;
    const OpArgs<Tensor> args = bind_node_args<Tensor>(b, [&f](size_t v) { return f.vals[v]; });
    const KernelFn& kernel = b.op->kernels.find(backend_->name())->second;
    std::vector<Tensor> out = NodeRunner::call(b, [&] { return kernel(c, args); });
    if (out.empty() || out[0].data() != slot.data()) {
      throw Error(ErrorCode::kInternal, b.op->name + ": the kernel did not write its result in place during capture",
                  b.id);
    }
  }
}

void DeviceGraph::capture_cond(const Frame& f, size_t node, const OpContext& ctx) {
  const BoundNode& b = f.cp->nodes[node];
  const Frame::Control& ctl = f.control.at(node);
  const Tensor& pred = f.vals[static_cast<size_t>(operands(b).at(0))];
  auto cc = backend_->begin_conditional(ctx.stream, ConditionalKind::kIf, pred.data(), nullptr);
  for (int k = 0; k < 2; ++k) {
    OpContext bc = ctx;
    bc.stream = cc->begin_body(k);
    const Frame& body = *ctl.bodies[static_cast<size_t>(k)];
    capture(body, bc);
    for (size_t j = 0; j < b.outputs.size(); ++j) {
      copy(bc, f.vals[static_cast<size_t>(b.outputs[j])],
           body.vals[static_cast<size_t>(body.cp->outputs.at(j).second)]);
    }
    cc->end_body();
  }
}

void DeviceGraph::capture_while(const Frame& f, size_t node, const OpContext& ctx) {
  const BoundNode& b = f.cp->nodes[node];
  const Frame::Control& ctl = f.control.at(node);
  const Frame& cond0 = *ctl.bodies[0];
  const Frame& body = *ctl.bodies[1];
  const Frame& cond1 = *ctl.bodies[2];
  // The carries start as the operands.
  for (size_t j = 0; j < b.outputs.size(); ++j) {
    copy(ctx, f.vals[static_cast<size_t>(b.outputs[j])], f.vals[static_cast<size_t>(operands(b).at(j))]);
  }
  capture(cond0, ctx);
  const Tensor& pred0 = cond0.vals[static_cast<size_t>(cond0.cp->outputs.at(0).second)];
  auto cc = backend_->begin_conditional(ctx.stream, ConditionalKind::kWhile, pred0.data(), ctl.loop_state.data());
  OpContext bc = ctx;
  bc.stream = cc->begin_body(0);
  capture(body, bc);
  // Staged: a result may be another carry's buffer (a swap).
  for (size_t j = 0; j < b.outputs.size(); ++j) {
    copy(bc, ctl.staging[j], body.vals[static_cast<size_t>(body.cp->outputs.at(j).second)]);
  }
  for (size_t j = 0; j < b.outputs.size(); ++j) copy(bc, f.vals[static_cast<size_t>(b.outputs[j])], ctl.staging[j]);
  capture(cond1, bc);
  const Tensor& pred1 = cond1.vals[static_cast<size_t>(cond1.cp->outputs.at(0).second)];
  cc->set_loop_condition(pred1.data(), b.control->max_iters);
  cc->end_body();
}

void DeviceGraph::prepare_collectives(const OpContext& ctx) {
  for (const BoundNode& b : cp_->nodes) {
    if (b.control || !b.op->collective) continue;
    OpContext c = ctx;
    GraphHooks hooks;
    hooks.capture = CapturePhase::kPrepare;
    c.graph = &hooks;
    c.stored = nullptr;
    const OpArgs<Tensor> args = bind_node_args<Tensor>(b, [this](size_t v) { return root_->vals[v]; });
    const KernelFn& kernel = b.op->kernels.find(backend_->name())->second;
    NodeRunner::call(b, [&] { return kernel(c, args); });
  }
}

bool DeviceGraph::stale(const OpContext& ctx) const {
  for (const auto& w : work_) {
    if (!w->valid_for(ctx)) return true;
  }
  return false;
}

void DeviceGraph::capture(const ExecOptions& opts) {
  const OpContext& ctx = opts.ctx;
  graph_.reset();
  work_.clear();
  prepare_collectives(ctx);  // host-synchronous: before the stream capture
  backend_->begin_capture(ctx.stream);
  try {
    capture(*root_, ctx);
  } catch (...) {
    work_.clear();
    try {
      backend_->end_capture(ctx.stream);  // abandoned
    } catch (...) {
    }
    throw;
  }
  try {
    graph_ = backend_->end_capture(ctx.stream);
  } catch (...) {
    work_.clear();
    throw;
  }
  ++captures_;
}

ExecResult DeviceGraph::run(const std::map<std::string, Tensor>& inputs, const ExecOptions& opts) {
  check_running(opts, std::chrono::steady_clock::now(), std::string(), [] { return "before the graph launch"; });
  const OpContext& ctx = opts.ctx;
  for (const auto& [name, id] : cp_->inputs) {
    const Tensor& dst = root_->vals[static_cast<size_t>(id)];
    if (dst.nbytes()) backend_->copy_to_device(device_, dst.data(), inputs.at(name).data(), dst.nbytes());
  }
  if (!graph_ || stale(ctx)) capture(opts);
  // The collectives' seqs and flight-recorder entries, in capture order;
  // any that cannot run fails the replay before the launch.
  size_t recorded = 0;
  auto finish_all = [&](bool ok) {
    for (size_t k = 0; k < recorded; ++k) work_[k]->finished(ok);
  };
  try {
    for (; recorded < work_.size(); ++recorded) work_[recorded]->before_launch();
    backend_->launch_graph(ctx.stream, *graph_);
    for (const auto& w : work_) w->launched();
    // Bounded where the graph holds collectives (the first wait covers the
    // whole launch; a peer that never joins ends it), else plain.
    for (const auto& w : work_) w->wait(ctx);
    backend_->synchronize(ctx.stream);
  } catch (...) {
    finish_all(false);
    throw;
  }
  finish_all(true);
  for (const auto& [node, state] : loops_) {
    int64_t s[2] = {0, 0};  // trips, overflow
    backend_->copy_to_host(device_, s, state.data(), sizeof s);
    if (s[1]) throw_past_max_iters(*node->control, node->id);
  }
  ExecResult res;
  for (const auto& [name, id] : cp_->outputs)
    res.outputs.emplace_back(name, root_->vals[static_cast<size_t>(id)].to_host());
  return res;
}

}  // namespace tensord
