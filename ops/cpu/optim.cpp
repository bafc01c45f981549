// Fused optimizers (API.md section 6): optim.sgd, optim.adam, optim.adamw,
// optim.adagrad, optim.muon. Each takes a list of stored parameters and a
// list of gradients and updates the parameters and their state in place,
// with torch.optim's defaults and update rules.
//
// State naming: "<state>/<param>/<key>", where <param> is the parameter's
// stored name ("$stored/" removed) and <key> is PyTorch's state key: step
// (a float32 scalar, like PyTorch's tensor step), exp_avg, exp_avg_sq,
// max_exp_avg_sq (amsgrad), momentum_buffer (SGD with momentum, Muon), sum
// (Adagrad). State tensors have the parameter's dtype and shape. A missing
// state tensor is created on that step as PyTorch creates it (zeros,
// initial_accumulator_value, SGD's buffer = the gradient; step 0 before the
// increment); one of another dtype or shape is 422 invalid_argument.
//
// Atomicity: stored tensors are immutable values, so a step never writes the
// old buffers. It validates everything, allocates new parameter and state
// buffers (charged to the tenant), runs one fused pass from the old buffers
// into the new ones, and hands the new tensors to the job's StoredIO, which
// commits them only if the whole program succeeds.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ops/cpu/optim_loop.h"
#include "ops/cpu/register.h"
#include "ops/error.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

constexpr std::string_view kStored = "$stored/";

enum class Kind { kSgd, kAdam, kAdamW, kAdagrad, kMuon };

// ---------------------------------------------------------------- helpers

[[noreturn]] void invalid(const std::string& op, const std::string& msg) {
  throw Error(ErrorCode::kInvalidArgument, op + ": " + msg);
}

std::string num_str(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

const TensorMeta& meta_of(const TensorMeta& m) {
  return m;
}
const TensorMeta& meta_of(const Tensor& t) {
  return t.meta();
}

template <class T>
const Attr& attr(const OpArgs<T>& a, const char* name) {
  const int i = a.op->param_index(name);
  TENSORD_ASSERT(i >= 0);
  return a.attr(static_cast<size_t>(i));
}

template <class T>
double num(const OpArgs<T>& a, const char* name) {
  return attr(a, name).to_double((a.op->name + ": " + name).c_str());
}

template <class T>
bool flag(const OpArgs<T>& a, const char* name) {
  return attr(a, name).to_bool((a.op->name + ": " + name).c_str());
}

// A stored-name path: [A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*, no "." / ".." segments.
bool valid_path(const std::string& s) {
  if (s.empty() || s.size() > 256) return false;
  size_t seg = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == '/') {
      const std::string part = s.substr(seg, i - seg);
      if (part.empty() || part == "." || part == "..") return false;
      seg = i + 1;
      continue;
    }
    const char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
          c == '-'))
      return false;
  }
  return true;
}

bool supported_dtype(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kBFloat16 || d == DType::kFloat16;
}

// The state keys each optimizer keeps per parameter, in PyTorch's order.
struct Slots {
  std::vector<std::string> keys;  // array state (param-shaped)
  bool has_step = false;
};

struct Hyper {
  Kind kind{};
  kernels::AdamHyper adam;
  kernels::SgdHyper sgd;
  kernels::AdagradHyper adagrad;
  kernels::MuonHyper muon;
  std::string state;  // prefix, "" when not given
};

Slots slots_of(const Hyper& h) {
  switch (h.kind) {
    case Kind::kAdam:
    case Kind::kAdamW:
      if (h.adam.amsgrad) return {{"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}, true};
      return {{"exp_avg", "exp_avg_sq"}, true};
    case Kind::kSgd:
      if (h.sgd.momentum != 0) return {{"momentum_buffer"}, false};
      return {{}, false};
    case Kind::kAdagrad:
      return {{"sum"}, true};
    case Kind::kMuon:
      return {{"momentum_buffer"}, false};
  }
  return {};
}

// Reads and range-checks the hyper-parameters (torch.optim's checks and
// messages). The same code runs at shape inference and in the kernel.
template <class T>
Hyper parse_hyper(const OpArgs<T>& a, Kind kind) {
  const std::string& op = a.op->name;
  Hyper h;
  h.kind = kind;
  const double lr = num(a, "lr");
  if (!(lr >= 0)) invalid(op, "Invalid learning rate: " + num_str(lr));
  const double wd = num(a, "weight_decay");
  if (!(wd >= 0)) invalid(op, "Invalid weight_decay value: " + num_str(wd));
  const Attr& st = attr(a, "state");
  if (!st.is_none()) {
    h.state = st.to_string((op + ": state").c_str());
    if (!valid_path(h.state)) {
      invalid(op,
              "state '" + h.state + "' is not a valid stored-tensor prefix ([A-Za-z0-9_.-] segments joined by '/')");
    }
  }
  switch (kind) {
    case Kind::kAdam:
    case Kind::kAdamW: {
      auto& ad = h.adam;
      ad.adamw = kind == Kind::kAdamW;
      ad.lr = lr;
      ad.weight_decay = wd;
      const std::vector<double> betas = attr(a, "betas").to_double_list((op + ": betas").c_str());
      if (betas.size() != 2) invalid(op, "betas must be a list of two numbers, got " + std::to_string(betas.size()));
      ad.beta1 = betas[0];
      ad.beta2 = betas[1];
      ad.eps = num(a, "eps");
      if (!(ad.eps >= 0)) invalid(op, "Invalid epsilon value: " + num_str(ad.eps));
      if (!(ad.beta1 >= 0 && ad.beta1 < 1)) invalid(op, "Invalid beta parameter at index 0: " + num_str(ad.beta1));
      if (!(ad.beta2 >= 0 && ad.beta2 < 1)) invalid(op, "Invalid beta parameter at index 1: " + num_str(ad.beta2));
      ad.amsgrad = flag(a, "amsgrad");
      ad.maximize = flag(a, "maximize");
      break;
    }
    case Kind::kSgd: {
      auto& s = h.sgd;
      s.lr = lr;
      s.weight_decay = wd;
      s.momentum = num(a, "momentum");
      if (!(s.momentum >= 0)) invalid(op, "Invalid momentum value: " + num_str(s.momentum));
      s.dampening = num(a, "dampening");
      if (!std::isfinite(s.dampening)) invalid(op, "Invalid dampening value: " + num_str(s.dampening));
      s.nesterov = flag(a, "nesterov");
      s.maximize = flag(a, "maximize");
      if (s.nesterov && (s.momentum <= 0 || s.dampening != 0)) {
        invalid(op, "Nesterov momentum requires a momentum and zero dampening");
      }
      break;
    }
    case Kind::kAdagrad: {
      auto& g = h.adagrad;
      g.lr = lr;
      g.weight_decay = wd;
      g.lr_decay = num(a, "lr_decay");
      if (!(g.lr_decay >= 0)) invalid(op, "Invalid lr_decay value: " + num_str(g.lr_decay));
      g.initial_accumulator_value = num(a, "initial_accumulator_value");
      if (!(g.initial_accumulator_value >= 0)) {
        invalid(op, "Invalid initial_accumulator_value value: " + num_str(g.initial_accumulator_value));
      }
      g.eps = num(a, "eps");
      if (!(g.eps >= 0)) invalid(op, "Invalid epsilon value: " + num_str(g.eps));
      g.maximize = flag(a, "maximize");
      break;
    }
    case Kind::kMuon: {
      auto& m = h.muon;
      m.lr = lr;
      m.weight_decay = wd;
      m.momentum = num(a, "momentum");
      if (!(m.momentum >= 0 && m.momentum < 1)) invalid(op, "Invalid momentum value: " + num_str(m.momentum));
      m.nesterov = flag(a, "nesterov");
      const std::vector<double> co = attr(a, "ns_coefficients").to_double_list((op + ": ns_coefficients").c_str());
      if (co.size() != 3 || !std::isfinite(co[0]) || !std::isfinite(co[1]) || !std::isfinite(co[2])) {
        invalid(op, "ns_coefficients must be three finite numbers (a, b, c)");
      }
      m.ns_a = co[0];
      m.ns_b = co[1];
      m.ns_c = co[2];
      m.eps = num(a, "eps");
      if (!(m.eps >= 0)) invalid(op, "Invalid epsilon value: " + num_str(m.eps));
      const int64_t steps = attr(a, "ns_steps").to_int((op + ": ns_steps").c_str());
      if (steps < 0 || steps > 100) invalid(op, "ns_steps must be in [0, 100], got " + std::to_string(steps));
      m.ns_steps = static_cast<int>(steps);
      const std::string& fn = attr(a, "adjust_lr_fn").to_string((op + ": adjust_lr_fn").c_str());
      if (fn != "original" && fn != "match_rms_adamw") {
        invalid(op, "adjust_lr_fn must be 'original' or 'match_rms_adamw', got '" + fn + "'");
      }
      m.match_rms_adamw = fn == "match_rms_adamw";
      break;
    }
  }
  if (h.state.empty() && !slots_of(h).keys.empty()) {
    invalid(op, "needs a 'state' prefix: its state (" + slots_of(h).keys[0] + ", ...) lives in stored tensors");
  }
  return h;
}

// Lists, names, shapes and dtypes (shape inference and kernel alike).
template <class T>
std::vector<std::string> check_tensors(const OpArgs<T>& a, Kind kind) {
  const std::string& op = a.op->name;
  const auto& ps = a.list(0);
  const auto& gs = a.list(1);
  if (ps.empty()) invalid(op, "params is an empty list");
  if (ps.size() != gs.size()) {
    invalid(op, "got " + std::to_string(ps.size()) + " params and " + std::to_string(gs.size()) +
                    " grads; the lists must have the same length");
  }
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (size_t i = 0; i < ps.size(); ++i) {
    const std::string& n = i < a.names[0].size() ? a.names[0][i] : std::string();
    if (n.rfind(kStored, 0) != 0) {
      invalid(op, "params[" + std::to_string(i) + "] ('" + n +
                      "') is not a stored tensor: optimizers update \"$stored/<name>\" tensors in place");
    }
    std::string name = n.substr(kStored.size());
    if (!seen.insert(name).second) invalid(op, "parameter '" + name + "' appears twice in params");
    const TensorMeta& p = meta_of(ps[i]);
    const TensorMeta& g = meta_of(gs[i]);
    if (!supported_dtype(p.dtype)) {
      throw Error(ErrorCode::kDtypeMismatch, op + ": params[" + std::to_string(i) + "] ('" + name + "') is " +
                                                 std::string(dtype_name(p.dtype)) +
                                                 "; optimizers take float32, float64, bfloat16 or float16 parameters");
    }
    if (g.dtype != p.dtype) {
      throw Error(ErrorCode::kDtypeMismatch, op + ": grads[" + std::to_string(i) + "] is " +
                                                 std::string(dtype_name(g.dtype)) + " but its parameter '" + name +
                                                 "' is " + std::string(dtype_name(p.dtype)));
    }
    if (g.shape != p.shape) {
      throw Error(ErrorCode::kShapeMismatch, op + ": grads[" + std::to_string(i) + "] has shape " + shape_str(g.shape) +
                                                 " but its parameter '" + name + "' has shape " + shape_str(p.shape));
    }
    if (kind == Kind::kMuon && p.shape.size() != 2) {
      invalid(op, "Muon only supports 2-D parameters, but '" + name + "' has shape " + shape_str(p.shape));
    }
    names.push_back(std::move(name));
  }
  return names;
}

template <class T>
void check_amp(const OpArgs<T>& a) {
  const std::string& op = a.op->name;
  for (const char* what : {"grad_scale", "found_inf"}) {
    const int i = a.op->param_index(what);
    if (i < 0 || !a.has_tensor(static_cast<size_t>(i))) continue;
    const TensorMeta& m = meta_of(a.tensor(static_cast<size_t>(i)));
    if (m.numel() != 1 || !(m.dtype == DType::kFloat32 || m.dtype == DType::kFloat64)) {
      invalid(op, std::string(what) + " must be a one-element float32 tensor, got " + m.str());
    }
  }
}

template <class T>
Hyper check_all(const OpArgs<T>& a, Kind kind, std::vector<std::string>* names) {
  Hyper h = parse_hyper(a, kind);
  std::vector<std::string> n = check_tensors(a, kind);
  check_amp(a);
  for (const auto& name : n) {
    for (const auto& key : slots_of(h).keys) {
      if (h.state.size() + name.size() + key.size() + 2 > 256) {
        invalid(a.op->name, "state name '" + h.state + "/" + name + "/" + key + "' is longer than 256 bytes");
      }
    }
  }
  if (names) *names = std::move(n);
  return h;
}

// A one-element float32/float64 tensor's value (copied out of a device).
double scalar_value(const Tensor& dev_or_host) {
  const Tensor t = dev_or_host.to_host();
  return t.dtype() == DType::kFloat64 ? *t.data_ptr<double>() : static_cast<double>(*t.data_ptr<float>());
}

// ---------------------------------------------------------------- the kernel

const OptimPasses kCpuPasses{fused_adam_cpu, fused_sgd_cpu, fused_adagrad_cpu};

// An optimizer's step on the context's device: `passes` run the fused pass
// there (host loops, or one CUDA launch; Muon's pass is always the CPU's),
// and every parameter and state buffer it is given lives on that device.
std::vector<Tensor> run_step(const OpContext& ctx, const OpArgs<Tensor>& a, Kind kind, const OptimPasses& passes) {
  const std::string& op = a.op->name;
  const bool device = ctx.on_device();
  // Stored tensors a device kernel is given may still be in host memory
  // (uploaded, never updated on the device): moved, as placement would.
  auto here = [&](const Tensor& t) { return device ? t.to_device(ctx.backend, ctx.device, ctx.account) : t; };
  std::vector<std::string> names;
  Hyper h = check_all(a, kind, &names);
  if (!ctx.stored) invalid(op, "needs a job's stored tensors (it updates them in place)");

  // AMP: skip the whole step when found_inf is set (params, state and step
  // unchanged), divide gradients by grad_scale otherwise.
  const int fi = a.op->param_index("found_inf");
  if (fi >= 0 && a.has_tensor(static_cast<size_t>(fi)) && scalar_value(a.tensor(static_cast<size_t>(fi))) != 0) {
    return {};
  }
  const int gsi = a.op->param_index("grad_scale");
  if (gsi >= 0 && a.has_tensor(static_cast<size_t>(gsi))) {
    const double s = scalar_value(a.tensor(static_cast<size_t>(gsi)));
    h.adam.grad_scale = h.sgd.grad_scale = h.adagrad.grad_scale = s;
  }

  const Slots slots = slots_of(h);
  const size_t n = names.size();
  std::vector<Tensor> params(n), grads(n), new_params(n), new_steps(n);
  std::vector<std::vector<Tensor>> old_state(n), new_state(n);
  std::vector<OptimTensorIO> io(n);
  std::vector<int64_t> rows(n), cols(n);

  // 1. Read and validate everything (nothing is allocated or written yet).
  for (size_t i = 0; i < n; ++i) {
    const Tensor& arg = a.list(0)[i];
    std::optional<Tensor> cur = ctx.stored->read(names[i]);  // sees this job's earlier writes
    params[i] = here(cur ? *cur : arg);
    if (params[i].dtype() != arg.dtype() || params[i].shape() != arg.shape()) {
      invalid(op, "parameter '" + names[i] + "' changed to " + params[i].meta().str() + " earlier in this program");
    }
    const Tensor& g = grads[i] = here(a.list(1)[i]);  // kept alive for the pass
    OptimTensorIO& t = io[i];
    t.dtype = params[i].dtype();
    t.numel = params[i].numel();
    t.param = params[i].data();
    t.grad = g.data();
    if (kind == Kind::kMuon) {
      rows[i] = params[i].shape()[0];
      cols[i] = params[i].shape()[1];
    }
    old_state[i].resize(slots.keys.size());
    for (size_t k = 0; k < slots.keys.size(); ++k) {
      const std::string sname = h.state + "/" + names[i] + "/" + slots.keys[k];
      std::optional<Tensor> s = ctx.stored->read(sname);
      if (!s) continue;
      if (s->dtype() != t.dtype || s->shape() != params[i].shape()) {
        invalid(op, "state '" + sname + "' is " + s->meta().str() + " but parameter '" + names[i] + "' is " +
                        params[i].meta().str() + " (state of another optimizer or parameter under this prefix?)");
      }
      old_state[i][k] = here(*s);
      t.state_in[k] = old_state[i][k].data();
    }
    if (kind == Kind::kAdagrad) t.state_init[0] = h.adagrad.initial_accumulator_value;
    if (slots.has_step) {
      const std::string sname = h.state + "/" + names[i] + "/step";
      double step = 0;
      if (std::optional<Tensor> s = ctx.stored->read(sname)) {
        if (s->numel() != 1 || !(s->dtype() == DType::kFloat32 || s->dtype() == DType::kFloat64)) {
          invalid(op, "state '" + sname + "' is " + s->meta().str() + ", expected a float32 scalar");
        }
        step = scalar_value(*s);
        if (!(step >= 0) || !std::isfinite(step)) invalid(op, "state '" + sname + "' is " + num_str(step));
      }
      t.step = step + 1;
    }
  }

  // 2. New buffers (quota errors surface here, still before any write).
  for (size_t i = 0; i < n; ++i) {
    new_params[i] = ctx.empty(io[i].dtype, params[i].shape());
    io[i].param_out = new_params[i].data();
    for (size_t k = 0; k < slots.keys.size(); ++k) {
      new_state[i].push_back(ctx.empty(io[i].dtype, params[i].shape()));
      io[i].state_out[k] = new_state[i][k].data();
    }
    if (slots.has_step) {
      Tensor step = device ? Tensor::empty_host(DType::kFloat32, {}) : ctx.empty(DType::kFloat32, {});
      *step.data_ptr<float>() = static_cast<float>(io[i].step);
      new_steps[i] = here(step);
    }
  }

  // 3. One fused pass.
  switch (kind) {
    case Kind::kAdam:
    case Kind::kAdamW:
      passes.adam(ctx, h.adam, io);
      break;
    case Kind::kSgd:
      passes.sgd(ctx, h.sgd, io);
      break;
    case Kind::kAdagrad:
      passes.adagrad(ctx, h.adagrad, io);
      break;
    case Kind::kMuon:
      fused_muon_cpu(ctx, h.muon, io, rows, cols);
      break;
  }

  // 4. Hand the new values to the job (committed with it, all or nothing).
  for (size_t i = 0; i < n; ++i) {
    ctx.stored->write(names[i], new_params[i]);
    for (size_t k = 0; k < slots.keys.size(); ++k) {
      ctx.stored->write(h.state + "/" + names[i] + "/" + slots.keys[k], new_state[i][k]);
    }
    if (slots.has_step) ctx.stored->write(h.state + "/" + names[i] + "/step", new_steps[i]);
  }
  return {};
}

// ---------------------------------------------------------------- schemas

ParamSpec kw(const char* name, ParamKind kind, Attr def) {
  return ParamSpec{name, kind, std::move(def), false, true};
}
ParamSpec kw_opt(const char* name, ParamKind kind) {
  return ParamSpec{name, kind, Attr(), true, true};
}

void add_optimizer(OpRegistry& r, const char* name, Kind kind, std::string doc, std::vector<ParamSpec> hyper,
                   bool amp) {
  OpDef op;
  op.name = name;
  op.writes_stored_state = true;  // params and state, through the job's StoredIO
  op.doc = std::move(doc);
  op.params = {ParamSpec{"params", ParamKind::kTensorList, Attr(), false, false},
               ParamSpec{"grads", ParamKind::kTensorList, Attr(), false, false}};
  for (auto& p : hyper) op.params.push_back(std::move(p));
  if (amp) {
    op.params.push_back(kw_opt("grad_scale", ParamKind::kTensor));
    op.params.push_back(kw_opt("found_inf", ParamKind::kTensor));
  }
  op.dtypes = dtypes_floating();
  op.dtype_note = "math in float32 (float64 in float64); grads as their params";
  op.mutates = -1;  // writes go through the job's StoredIO (params and state)
  op.infer = [kind](const OpArgs<TensorMeta>& a) {
    check_all(a, kind, nullptr);
    return std::vector<TensorMeta>{};
  };
  op.kernels["cpu"] = [kind](const OpContext& ctx, const OpArgs<Tensor>& a) {
    return run_step(ctx, a, kind, kCpuPasses);
  };
  r.add(std::move(op));
}

}  // namespace

KernelFn make_optim_kernel(std::string_view op, const OptimPasses& passes) {
  const Kind kind = op == "optim.sgd"       ? Kind::kSgd
                    : op == "optim.adam"    ? Kind::kAdam
                    : op == "optim.adamw"   ? Kind::kAdamW
                    : op == "optim.adagrad" ? Kind::kAdagrad
                                            : Kind::kMuon;
  TENSORD_ASSERT(kind != Kind::kMuon);  // Muon's passes are not pluggable
  return [kind, passes](const OpContext& ctx, const OpArgs<Tensor>& a) { return run_step(ctx, a, kind, passes); };
}

void register_optim_ops(OpRegistry& r) {
  const auto F = ParamKind::kFloat;
  const auto B = ParamKind::kBool;
  add_optimizer(r, "optim.sgd", Kind::kSgd,
                "torch.optim.SGD step (fused, in place): momentum, dampening, nesterov, weight_decay, maximize.",
                {kw("lr", F, 1e-3), kw("momentum", F, 0.0), kw("dampening", F, 0.0), kw("weight_decay", F, 0.0),
                 kw("nesterov", B, false), kw("maximize", B, false), kw_opt("state", ParamKind::kString)},
                true);
  for (Kind k : {Kind::kAdam, Kind::kAdamW}) {
    const bool w = k == Kind::kAdamW;
    add_optimizer(r, w ? "optim.adamw" : "optim.adam", k,
                  w ? "torch.optim.AdamW step (fused, in place): decoupled weight decay, amsgrad, maximize."
                    : "torch.optim.Adam step (fused, in place): L2 weight decay, amsgrad, maximize.",
                  {kw("lr", F, 1e-3), kw("betas", ParamKind::kFloatList, std::vector<double>{0.9, 0.999}),
                   kw("eps", F, 1e-8), kw("weight_decay", F, w ? 1e-2 : 0.0), kw("amsgrad", B, false),
                   kw("maximize", B, false), kw("state", ParamKind::kString, Attr())},
                  true);
  }
  add_optimizer(
      r, "optim.adagrad", Kind::kAdagrad,
      "torch.optim.Adagrad step (fused, in place): lr_decay, initial_accumulator_value, weight_decay.",
      {kw("lr", F, 1e-2), kw("lr_decay", F, 0.0), kw("weight_decay", F, 0.0), kw("initial_accumulator_value", F, 0.0),
       kw("eps", F, 1e-10), kw("maximize", B, false), kw("state", ParamKind::kString, Attr())},
      true);
  add_optimizer(r, "optim.muon", Kind::kMuon,
                "torch.optim.Muon step (2-D params): momentum, Newton-Schulz orthogonalisation, adjusted lr.",
                {kw("lr", F, 1e-3), kw("weight_decay", F, 0.1), kw("momentum", F, 0.95), kw("nesterov", B, true),
                 kw("ns_coefficients", ParamKind::kFloatList, std::vector<double>{3.4445, -4.7750, 2.0315}),
                 kw("eps", F, 1e-7), kw("ns_steps", ParamKind::kInt, int64_t{5}),
                 kw("adjust_lr_fn", ParamKind::kString, "original"), kw("state", ParamKind::kString, Attr())},
                false);
}

}  // namespace tensord
