#include "graphs/replay_plan.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <mutex>

#include "graphs/buffer_plan.h"
#include "graphs/control_plan.h"
#include "graphs/fallback_executable.h"
#include "graphs/node_runner.h"
#include "graphs/pending_store.h"
#include "graphs/program_executable.h"
#include "ops/backend.h"
#include "ops/error.h"
#include "ops/graph_hooks.h"
#include "ops/recorded_block.h"

namespace tensord {

struct ReplayPlan::Instruction {
  const BoundNode* node = nullptr;
  const KernelFn* kernel = nullptr;  // null for control flow
  bool general = false;              // control flow or in-place: no slots, results copied in
  OpArgs<Tensor> args;               // over the static tensors
  // Per result the kernel returns: the named outputs' static tensors first,
  // then scratch buffers for results the node does not name.
  std::vector<Tensor> slots;
  // The kernel's loop, recorded on the first run when its op allows it
  // (ops/recorded_block.h); `fast` replays call it instead of the kernel.
  bool try_record = false;
  bool fast = false;
  RecordedBlock block;
  std::unique_ptr<ControlPlan> control;  // a cond/while_loop run as plans (null: execute_control_flow)
};

namespace {

constexpr size_t kAlign = 64;

size_t aligned_bytes(const TensorMeta& m) {
  return (m.nbytes() + kAlign - 1) / kAlign * kAlign;
}

bool same_buffer(const Tensor& a, const Tensor& b) {
  return a.storage() == b.storage() && a.data() == b.data();
}

// The metas of every result the op returns (a node may name fewer).
std::vector<TensorMeta> result_metas(const CompiledProgram& cp, const BoundNode& b) {
  std::vector<TensorMeta> m = b.op->infer(node_metas(b, cp));
  for (size_t k = 0; k < b.outputs.size() && k < m.size(); ++k)
    m[k] = cp.values[static_cast<size_t>(b.outputs[k])].meta;
  for (auto& r : m) r.wrapped_number = false;
  return m;
}

}  // namespace

ReplayPlan::ReplayPlan(std::shared_ptr<const CompiledProgram> cp, const std::map<std::string, Tensor>& input_buffers,
                       GraphPool& pool, Backend* backend, Device device, bool device_graph)
    : cp_(std::move(cp)), pool_(&pool) {
  runs_code_ = device.type == DeviceType::kCPU;
  for (const auto& [name, id] : cp_->inputs) {
    auto it = input_buffers.find(name);
    TENSORD_ASSERT(it != input_buffers.end());
    TENSORD_ASSERT(it->second.meta().dtype == cp_->values[static_cast<size_t>(id)].meta.dtype &&
                   it->second.shape() == cp_->values[static_cast<size_t>(id)].meta.shape);
    inputs_.emplace_back(name, it->second);
  }
  if (runs_code_) {
    bind(pool, backend);
    return;
  }
  device_run_ = std::make_shared<ProgramExecutable>(cp_);
  if (device_graph && backend && DeviceGraph::capturable(*cp_, backend->name())) {
    device_graph_ = std::make_shared<DeviceGraph>(cp_, backend, device, pool.account());
    // A capture the device refused (a kernel that allocated, a backend
    // without capture): the executor's path from then on.
    const DeviceGraph* dg = device_graph_.get();
    device_run_ = std::make_shared<FallbackExecutable>(device_graph_, device_run_, [dg](const Error& e) {
      return !dg->captured() && (e.code() == ErrorCode::kInternal || e.code() == ErrorCode::kUnsupported);
    });
  }
}

void ReplayPlan::launch_on(std::shared_ptr<DeviceGraph> graph) {
  TENSORD_ASSERT(!runs_code_);
  device_run_ = std::move(graph);
}

ReplayPlan::~ReplayPlan() = default;

size_t ReplayPlan::instructions() const {
  return runs_code_ ? code_.size() : cp_->nodes.size();
}

size_t ReplayPlan::general_instructions() const {
  if (!runs_code_) return cp_->nodes.size();
  return static_cast<size_t>(std::count_if(code_.begin(), code_.end(), [](const Instruction& i) { return i.general; }));
}

size_t ReplayPlan::recorded_instructions() const {
  return static_cast<size_t>(std::count_if(code_.begin(), code_.end(), [](const Instruction& i) { return i.fast; }));
}

size_t ReplayPlan::buffers() const {
  return n_buffers_;
}

int64_t ReplayPlan::extra_bytes() const {
  int64_t n = 0;
  for (const Instruction& i : code_) n += i.control ? i.control->bytes() : 0;
  return n;
}

size_t ReplayPlan::control_plans() const {
  return static_cast<size_t>(
      std::count_if(code_.begin(), code_.end(), [](const Instruction& i) { return i.control != nullptr; }));
}

void ReplayPlan::bind(GraphPool& pool, Backend* backend) {
  const CompiledProgram& cp = *cp_;
  const std::string_view bname = backend ? backend->name() : std::string_view("cpu");
  values_.resize(cp.values.size());
  for (size_t v = 0; v < cp.values.size(); ++v) {
    if (cp.constants[v].defined()) values_[v] = cp.constants[v];
  }
  for (size_t i = 0; i < cp.inputs.size(); ++i) values_[static_cast<size_t>(cp.inputs[i].second)] = inputs_[i].second;

  // Every result of every node gets a buffer; values that are never live at
  // once share one.
  struct Result {
    size_t node;
    size_t k;
    TensorMeta meta;
  };
  std::vector<Result> results;
  std::vector<BufferUse> uses;
  code_.resize(cp.nodes.size());
  for (size_t i = 0; i < cp.nodes.size(); ++i) {
    const BoundNode& b = cp.nodes[i];
    Instruction& ins = code_[i];
    ins.node = &b;
    ins.general = b.control != nullptr || b.op->mutates >= 0;
    ins.try_record = !ins.general && b.op->records_blocks && b.writes_stored.empty() && b.outputs.size() == 1;
    if (!b.control) {
      auto kit = b.op->kernels.find(bname);
      if (kit == b.op->kernels.end()) {
        throw NodeRunner::unsupported(bname, b);
      }
      ins.kernel = &kit->second;
    }
    // General instructions return fresh results: buffers for the named ones only.
    std::vector<TensorMeta> metas;
    if (ins.general) {
      for (int v : b.outputs) metas.push_back(cp.values[static_cast<size_t>(v)].meta);
    } else {
      metas = result_metas(cp, b);
    }
    for (size_t k = 0; k < metas.size(); ++k) {
      BufferUse u;
      u.def = static_cast<int>(i);
      u.last = static_cast<int>(i);
      if (k < b.outputs.size()) {
        const ValueInfo& vi = cp.values[static_cast<size_t>(b.outputs[k])];
        u.last = vi.last_use == INT_MAX ? INT_MAX : std::max(vi.last_use, static_cast<int>(i));
      }
      u.bytes = aligned_bytes(metas[k]);
      uses.push_back(u);
      results.push_back(Result{i, k, metas[k]});
    }
  }
  BufferAssignment a = assign_buffers(uses);
  n_buffers_ = a.sizes.size();
  std::vector<Tensor> chunks = pool.bind(a.sizes);
  for (size_t r = 0; r < results.size(); ++r) {
    const Result& res = results[r];
    const Tensor& chunk = chunks[static_cast<size_t>(a.buffer_of[r])];
    Tensor t(res.meta, chunk.storage(), 0);
    const BoundNode& b = cp.nodes[res.node];
    if (res.k < b.outputs.size()) values_[static_cast<size_t>(b.outputs[res.k])] = t;
    code_[res.node].slots.push_back(std::move(t));
  }
  for (const auto& c : chunks) static_storage_.push_back(c.storage().get());
  for (const auto& [name, t] : inputs_) static_storage_.push_back(t.storage().get());
  std::sort(static_storage_.begin(), static_storage_.end(), std::less<>());

  for (size_t i = 0; i < cp.nodes.size(); ++i) {
    code_[i].args = bind_node_args<Tensor>(cp.nodes[i], [this](size_t v) { return values_[v]; });
    if (ControlPlan::eligible(cp.nodes[i])) {
      code_[i].control = std::make_unique<ControlPlan>(cp.nodes[i], code_[i].args.tensors[0], backend, pool.account());
    }
  }
  for (const Tensor& t : values_) {
    if (!t.defined() || t.device().type != DeviceType::kCPU || t.nbytes() == 0) continue;
    const char* p = static_cast<const char*>(t.data());
    static_ranges_.emplace_back(p, p + t.nbytes());
  }
  std::sort(static_ranges_.begin(), static_ranges_.end());
}

bool ReplayPlan::in_static_range(const void* p, size_t bytes) const {
  const char* b = static_cast<const char*>(p);
  // The last range starting at or before b (ranges may nest: views).
  auto it = std::upper_bound(static_ranges_.begin(), static_ranges_.end(), b,
                             [](const char* x, const std::pair<const char*, const char*>& r) { return x < r.first; });
  for (; it != static_ranges_.begin();) {
    --it;
    if (b + bytes <= it->second) return true;
  }
  return false;
}

bool ReplayPlan::keep_recording(const BlockRecorder& rec, const Tensor& out, const Tensor& slot) const {
  const RecordedBlock& blk = rec.block;
  if (!rec.usable() || !same_buffer(out, slot) || blk.out != slot.data() || blk.out_count != slot.numel() ||
      blk.out_elem != dtype_size(slot.dtype())) {
    return false;
  }
  for (int k = 0; k < blk.n_inputs; ++k) {
    if ((blk.inline_mask >> k) & 1) continue;  // held in the block
    // The last element the loop reads, plus one.
    const int64_t last = (blk.rows - 1) * blk.row_stride[k] + (blk.row_len - 1) * blk.stride[k];
    const size_t bytes = static_cast<size_t>(last + 1) * blk.in_elem[k];
    if (!in_static_range(blk.in[k], bytes)) return false;  // a kernel's temporary
  }
  return true;
}

bool ReplayPlan::is_static(const Tensor& t) const {
  return t.defined() &&
         std::binary_search(static_storage_.begin(), static_storage_.end(), t.storage().get(), std::less<>());
}

Tensor ReplayPlan::copy_out(const Tensor& t) const {
  Tensor c = Tensor::empty_host(t.dtype(), t.shape());
  if (t.nbytes()) std::memcpy(c.data(), t.data(), t.nbytes());
  return c;
}

void ReplayPlan::check_inputs(const std::map<std::string, Tensor>& inputs) const {
  for (const auto& [name, t] : inputs) {
    bool known = false;
    for (const auto& in : inputs_) known = known || in.first == name;
    if (!known) throw Error(ErrorCode::kBadRequest, "input '" + name + "' is not a graph input");
  }
  for (const auto& [name, buf] : inputs_) {
    auto it = inputs.find(name);
    if (it == inputs.end()) throw Error(ErrorCode::kBadRequest, "missing input '" + name + "'");
    const Tensor& t = it->second;
    // An MX input must match in format, block size and axis too (its bytes).
    if (t.dtype() != buf.dtype() || t.shape() != buf.shape() ||
        ((t.is_mx() || buf.is_mx()) && t.meta().str() != buf.meta().str())) {
      throw Error(ErrorCode::kConflict,
                  "input '" + name + "' is " + t.meta().str() + ", the graph was captured with " + buf.meta().str());
    }
    if (t.device().type != DeviceType::kCPU || buf.device().type != DeviceType::kCPU) {
      throw Error(ErrorCode::kUnsupported, "graph replay copies inputs on the host only (for now)");
    }
  }
}

void ReplayPlan::load_inputs(const std::map<std::string, Tensor>& inputs) {
  check_inputs(inputs);
  for (const auto& [name, buf] : inputs_) {
    const Tensor& t = inputs.at(name);
    if (same_buffer(t, buf)) continue;  // the caller passed the static buffer itself
    if (buf.nbytes()) std::memcpy(buf.data(), t.data(), buf.nbytes());
  }
}

ExecResult ReplayPlan::run(const std::map<std::string, Tensor>& inputs, const ExecOptions& opts) {
  std::lock_guard<std::mutex> lease(pool_->run_mutex());
  if (!runs_code_) {
    // The device graph copies them in as they are (an SPMD member's were
    // checked before its job was queued).
    if (device_graph_) check_inputs(inputs);
    return device_run_->run(inputs, opts);
  }
  load_inputs(inputs);
  PendingStore pending(opts.stored_read, [this](const Tensor& t) { return is_static(t) ? copy_out(t) : t; });
  run_code(opts, pending);
  const CompiledProgram& cp = *cp_;
  ExecResult res;
  res.outputs.reserve(cp.outputs.size());
  for (const auto& [name, id] : cp.outputs) {
    const Tensor& t = values_[static_cast<size_t>(id)];
    // Constants and stored snapshots are never overwritten; the rest is.
    res.outputs.emplace_back(name, is_static(t) ? copy_out(t) : t);
  }
  res.stored_writes = pending.take();
  return res;
}

std::vector<Tensor> ReplayPlan::run_views(const ExecOptions& opts) {
  TENSORD_ASSERT(runs_code_);
  PendingStore pending(opts.stored_read);
  run_code(opts, pending);
  std::vector<Tensor> out;
  out.reserve(cp_->outputs.size());
  for (const auto& [name, id] : cp_->outputs) out.push_back(values_[static_cast<size_t>(id)]);
  return out;
}

void ReplayPlan::run_code(const ExecOptions& opts, PendingStore& pending) {
  OpContext ctx = opts.ctx;
  ctx.stored = &pending;
  // This plan's hooks for the kernels it calls (a control-flow body's
  // runner keeps what the caller's context had, its slots aside).
  GraphHooks hooks = opts.ctx.graph ? *opts.ctx.graph : GraphHooks{};
  hooks.out_slots = nullptr;
  hooks.recorder = nullptr;
  ctx.graph = &hooks;
  OutputSlots slots;
  int64_t copies = 0;
  NodeRunner runner(*cp_, opts);
  for (Instruction& ins : code_) {
    const BoundNode& b = *ins.node;
    runner.before(b);
    if (ins.fast) {
      ins.block.run(ctx);
      runner.after(b, runner.ran_on(false));
      continue;
    }
    BlockRecorder rec;
    std::vector<Tensor> out = NodeRunner::call(b, [&] {
      if (ins.control) return ins.control->run(opts);
      if (b.control) return execute_control_flow(b, ins.args.tensors[0], opts, pending);
      if (ins.general) return (*ins.kernel)(ctx, ins.args);
      slots = OutputSlots{ins.slots.data(), ins.slots.size(), 0};
      hooks.out_slots = &slots;
      if (ins.try_record) hooks.recorder = &rec;
      std::vector<Tensor> r = (*ins.kernel)(ctx, ins.args);
      hooks.out_slots = nullptr;
      hooks.recorder = nullptr;
      return r;
    });
    runner.check_results(b, out);
    const size_t n = b.outputs.size();
    for (size_t k = 0; k < n; ++k) {
      const Tensor& dst = values_[static_cast<size_t>(b.outputs[k])];
      if (same_buffer(out[k], dst)) continue;
      // In another result's buffer (a kernel that allocated them out of
      // order): set it aside before the copies below overwrite it.
      for (size_t j = 0; j < ins.slots.size(); ++j) {
        if (j != k && out[k].storage() == ins.slots[j].storage()) {
          out[k] = copy_out(out[k]);
          break;
        }
      }
    }
    for (size_t k = 0; k < n; ++k) {
      const Tensor& dst = values_[static_cast<size_t>(b.outputs[k])];
      if (same_buffer(out[k], dst)) continue;
      if (dst.nbytes()) std::memcpy(dst.data(), out[k].data(), dst.nbytes());
      ++copies;
    }
    if (ins.try_record) {
      ins.try_record = false;
      ins.fast = keep_recording(rec, out[0], values_[static_cast<size_t>(b.outputs[0])]);
      if (ins.fast) ins.block = rec.block;
    }
    if (!b.writes_stored.empty()) pending.write(b.writes_stored, out.at(0));
    // A flat plan's kernels are its backend's (bind()); control flow is
    // driven from the host, as in execute_program.
    runner.after(b, runner.ran_on(b.control != nullptr || ins.control != nullptr));
  }
  if (copies) slot_copies_.fetch_add(copies, std::memory_order_relaxed);
}

}  // namespace tensord
