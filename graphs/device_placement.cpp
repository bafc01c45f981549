#include "graphs/device_placement.h"

#include "ops/backend.h"

namespace tensord {

DevicePlacement::DevicePlacement(const OpContext& ctx, size_t values)
    : ctx_(ctx), host_ctx_(ctx), active_(ctx.backend && ctx.backend->name() != "cpu") {
  if (!active_) return;
  copies_.resize(values);
  host_ctx_.backend = nullptr;
  host_ctx_.device = Device{};
  host_ctx_.recorder = nullptr;
  host_ctx_.out_slots = nullptr;
}

const KernelFn* DevicePlacement::kernel(const BoundNode& b, const CompiledProgram& cp, bool* host) const {
  const OpDef& op = *b.op;
  const std::string_view bname = ctx_.backend ? ctx_.backend->name() : std::string_view("cpu");
  auto it = op.kernels.find(bname);
  *host = bname == "cpu";
  if (it != op.kernels.end() && active_) {
    auto acc = op.accepts.find(bname);
    if (acc != op.accepts.end() &&
        !acc->second(bind_node_args<TensorMeta>(b, [&cp](size_t v) { return cp.values[v].meta; }))) {
      it = op.kernels.end();
    }
  }
  if (it == op.kernels.end() && active_) {
    it = op.kernels.find("cpu");
    *host = true;
  }
  return it == op.kernels.end() ? nullptr : &it->second;
}

Tensor DevicePlacement::place(size_t v, const Tensor& t, bool host) {
  if (!active_ || !t.defined()) return t;
  if (t.meta().wrapped_number && t.on_host()) return t;
  const bool where_wanted = host ? t.on_host() : (t.device() == ctx_.device);
  if (where_wanted) return t;
  if (v < copies_.size() && copies_[v].defined()) return copies_[v];
  Tensor moved = host ? t.to_host() : t.to_device(ctx_.backend, ctx_.device, ctx_.account);
  if (host && ctx_.account) moved.storage()->charge(ctx_.account);
  moved.set_wrapped_number(t.meta().wrapped_number);
  if (v < copies_.size()) copies_[v] = moved;
  return moved;
}

void DevicePlacement::forget(size_t v) {
  if (v < copies_.size()) copies_[v] = Tensor();
}

const OpContext& DevicePlacement::host_ctx(StoredIO* stored) {
  host_stored_.inner = stored;
  host_ctx_.stored = stored ? &host_stored_ : nullptr;
  return host_ctx_;
}

std::optional<Tensor> DevicePlacement::HostStoredIO::read(const std::string& name) const {
  std::optional<Tensor> t = inner->read(name);
  if (t) t = t->to_host();
  return t;
}

}  // namespace tensord
