#include "ops/op_registry.h"

#include <algorithm>

#include "ops/backend.h"
#include "ops/cpu/thread_pool.h"
#include "ops/error.h"
#include "ops/graph_hooks.h"

namespace tensord {

std::string_view param_kind_name(ParamKind k) {
  switch (k) {
    case ParamKind::kTensor:
      return "Tensor";
    case ParamKind::kTensorList:
      return "Tensor[]";
    case ParamKind::kScalarOrTensor:
      return "Tensor|Scalar";
    case ParamKind::kInt:
      return "int";
    case ParamKind::kFloat:
      return "float";
    case ParamKind::kBool:
      return "bool";
    case ParamKind::kString:
      return "str";
    case ParamKind::kDType:
      return "dtype";
    case ParamKind::kIntList:
      return "int[]";
    case ParamKind::kFloatList:
      return "float[]";
  }
  return "?";
}

Tensor OpContext::empty(DType dtype, Shape shape) const {
  OutputSlots* out_slots = graph ? graph->out_slots : nullptr;
  if (out_slots && out_slots->next < out_slots->count) {
    const Tensor& slot = out_slots->slots[out_slots->next];
    if (slot.dtype() == dtype && slot.shape() == shape) {
      ++out_slots->next;
      return slot;
    }
  }
  if (!backend) {  // host memory (a CPU kernel run beside a device backend)
    Tensor t = Tensor::empty_host(dtype, std::move(shape));
    if (account) t.storage()->charge(account);
    return t;
  }
  return Tensor::empty(backend, device, dtype, std::move(shape), account);
}

bool OpContext::on_device() const {
  return backend && backend->name() != "cpu";
}

OpContext OpContext::for_host() const {
  OpContext h = *this;
  if (on_device()) {
    h.backend = nullptr;
    h.device = Device{};
  }
  return h;
}

void OpContext::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) const {
  if (n <= 0) return;
  if (pool) {
    pool->parallel_for(n, grain, fn);
  } else {
    fn(0, n);
  }
}

int OpDef::param_index(std::string_view pname) const {
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].name == pname) return static_cast<int>(i);
  }
  return -1;
}

std::string OpDef::signature() const {
  std::string s = name + "(";
  bool star = false;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    if (i) s += ", ";
    if (p.kwarg_only && !star) {
      s += "*, ";
      star = true;
    }
    s += std::string(param_kind_name(p.kind));
    if (p.optional) s += "?";
    s += " " + p.name;
    if (!p.default_value.is_none())
      s += "=" + p.default_value.repr();
    else if (p.optional)
      s += "=None";
  }
  s += ") -> ";
  if (outputs.empty()) {
    s += "()";
  } else if (outputs.size() == 1) {
    s += "Tensor";
  } else {
    s += "(";
    for (size_t i = 0; i < outputs.size(); ++i) s += (i ? ", Tensor " : "Tensor ") + outputs[i];
    s += ")";
  }
  return s;
}

OpDef& OpRegistry::add(OpDef def) {
  TENSORD_ASSERT(!ops_.count(def.name));
  auto name = def.name;
  auto& slot = ops_[name];
  slot = std::make_unique<OpDef>(std::move(def));
  return *slot;
}

const OpDef* OpRegistry::find(std::string_view name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

OpDef* OpRegistry::find_mutable(std::string_view name) {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

namespace {
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}
}  // namespace

std::vector<std::string> OpRegistry::close_names(std::string_view name, size_t max) const {
  if (name.size() > 64) name = name.substr(0, 64);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& [n, def] : ops_) {
    size_t d = edit_distance(name, n);
    if (n.find(name) != std::string::npos || name.find(n) != std::string_view::npos) d = std::min<size_t>(d, 1);
    if (d <= std::max<size_t>(2, n.size() / 3)) scored.emplace_back(d, n);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < max; ++i) out.push_back(scored[i].second);
  return out;
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::vector<const OpDef*> out;
  out.reserve(ops_.size());
  for (const auto& [n, def] : ops_) out.push_back(def.get());
  return out;
}

namespace {
std::vector<void (*)(OpRegistry&)>& kernel_registrations() {
  static std::vector<void (*)(OpRegistry&)> fns;
  return fns;
}
OpRegistry* g_built = nullptr;  // set once global() has built the registry
}  // namespace

KernelRegistration::KernelRegistration(void (*fn)(OpRegistry&)) {
  // Static initialisation is single-threaded: a registry some earlier
  // initialiser already built takes the kernels at once.
  if (g_built) {
    fn(*g_built);
  } else {
    kernel_registrations().push_back(fn);
  }
}

const OpRegistry& OpRegistry::global() {
  static const OpRegistry* reg = [] {
    auto* r = new OpRegistry();
    register_all_ops(*r);
    for (auto fn : kernel_registrations()) fn(*r);
    g_built = r;
    return r;
  }();
  return *reg;
}

}  // namespace tensord
