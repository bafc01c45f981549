#include "graphs/device_placement.h"

#include "ops/backend.h"

namespace tensord {

DevicePlacement::DevicePlacement(const OpContext& ctx, size_t values)
    : ctx_(ctx), host_ctx_(ctx.for_host()), active_(ctx.on_device()) {
  if (!active_) return;
  copies_.resize(values);
  host_ctx_.graph = nullptr;  // a replay's slots and recording are the device kernels'
}

const KernelFn* DevicePlacement::kernel(const BoundNode& b, const CompiledProgram& cp, bool* host) const {
  const OpDef& op = *b.op;
  if (active_ && kernel_takes(b, cp, ctx_.backend->name())) {
    *host = false;
    return &op.kernels.find(ctx_.backend->name())->second;
  }
  *host = true;  // inactive: the backend is the CPU's (or none)
  auto it = op.kernels.find("cpu");
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
