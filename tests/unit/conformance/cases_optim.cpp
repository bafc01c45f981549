// Fused optimizers: optim.sgd adam adamw adagrad muon, two steps over two
// stored parameters so state written by the first step is read by the
// second. SGD, Adam, AdamW and Adagrad have references here (torch.optim's
// update rules in double, parameters and state rounded to the parameter's
// dtype after each step, as the kernels store them); Muon's Newton-Schulz
// iteration is run and compared across backends only.
#include <cmath>
#include <string>
#include <utility>

#include "tests/unit/conformance/variants.h"

namespace tensord::conformance {
namespace {

using Attrs = std::vector<std::pair<std::string, Attr>>;

DTypes optim_dtypes() {
  return {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kFloat16};
}

// Two parameters "w0" and "w1" of `shapes`, their gradients, the hyper-
// parameters and state prefix "opt"; `steps` steps.
Call optim_call(DType d, Rng& g, const std::vector<Shape>& shapes, const Attrs& hyper, int steps = 2) {
  Call c;
  TensorList params, grads;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string name = "w" + std::to_string(i);
    Tensor p = random_tensor(d, shapes[i], g, {-1, 1});
    c.stored[name] = p;
    params.tensors.push_back(p);
    params.names.push_back("$stored/" + name);
    grads.tensors.push_back(random_tensor(d, shapes[i], g, {-1, 1}));
  }
  c.arg("params", std::move(params)).arg("grads", std::move(grads)).arg("state", Attr("opt"));
  for (const auto& [k, v] : hyper) c.arg(k, v);
  c.steps = steps;
  return c;
}

double hyper(const Call& c, const char* name, double def) {
  const Attr& a = c.attr(name);
  return a.is_none() ? def : a.to_double(name);
}
bool flag(const Call& c, const char* name) {
  const Attr& a = c.attr(name);
  return !a.is_none() && a.to_bool(name);
}
double scalar(const Call& c, const char* name, double def) {
  const Value* v = c.find(name);
  return v ? ref::value(std::get<Tensor>(*v), 0) : def;
}

// One parameter's values and state, in double.
struct Slot {
  std::vector<double> p, g;
  std::map<std::string, std::vector<double>> state;
  double step = 0;
};

enum class Kind { kSgd, kAdam, kAdamW, kAdagrad };

void step_one(Kind kind, const Call& c, Slot& s, double grad_scale) {
  const size_t n = s.p.size();
  const double lr = hyper(c, "lr", kind == Kind::kAdagrad ? 1e-2 : 1e-3);
  const double wd = hyper(c, "weight_decay", kind == Kind::kAdamW ? 1e-2 : 0.0);
  const bool maximize = flag(c, "maximize");
  std::vector<double> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = (maximize ? -1 : 1) * s.g[i] / grad_scale;
  if (kind == Kind::kSgd) {
    const double mom = hyper(c, "momentum", 0), damp = hyper(c, "dampening", 0);
    for (size_t i = 0; i < n; ++i) g[i] += wd * s.p[i];
    if (mom != 0) {
      auto it = s.state.find("momentum_buffer");
      if (it == s.state.end()) {
        s.state["momentum_buffer"] = g;
      } else {
        for (size_t i = 0; i < n; ++i) it->second[i] = mom * it->second[i] + (1 - damp) * g[i];
      }
      const auto& buf = s.state["momentum_buffer"];
      for (size_t i = 0; i < n; ++i) g[i] = flag(c, "nesterov") ? g[i] + mom * buf[i] : buf[i];
    }
    for (size_t i = 0; i < n; ++i) s.p[i] -= lr * g[i];
    return;
  }
  s.step += 1;
  if (kind == Kind::kAdagrad) {
    auto& sum = s.state.try_emplace("sum", n, hyper(c, "initial_accumulator_value", 0)).first->second;
    const double clr = lr / (1 + (s.step - 1) * hyper(c, "lr_decay", 0));
    const double eps = hyper(c, "eps", 1e-10);
    for (size_t i = 0; i < n; ++i) {
      g[i] += wd * s.p[i];
      sum[i] += g[i] * g[i];
      s.p[i] -= clr * g[i] / (std::sqrt(sum[i]) + eps);
    }
    return;
  }
  const Attr& betas = c.attr("betas");
  const std::vector<double> b = betas.is_none() ? std::vector<double>{0.9, 0.999} : betas.to_double_list("betas");
  const double eps = hyper(c, "eps", 1e-8);
  const bool ams = flag(c, "amsgrad");
  auto& m = s.state.try_emplace("exp_avg", n, 0.0).first->second;
  auto& v = s.state.try_emplace("exp_avg_sq", n, 0.0).first->second;
  std::vector<double>* vmax = ams ? &s.state.try_emplace("max_exp_avg_sq", n, 0.0).first->second : nullptr;
  const double bc1 = 1 - std::pow(b[0], s.step), bc2 = 1 - std::pow(b[1], s.step);
  for (size_t i = 0; i < n; ++i) {
    if (kind == Kind::kAdamW) {
      s.p[i] *= 1 - lr * wd;
    } else {
      g[i] += wd * s.p[i];
    }
    m[i] += (1 - b[0]) * (g[i] - m[i]);
    v[i] = b[1] * v[i] + (1 - b[1]) * g[i] * g[i];
    double vv = v[i];
    if (vmax) vv = (*vmax)[i] = std::max((*vmax)[i], v[i]);
    s.p[i] -= lr / bc1 * m[i] / (std::sqrt(vv) / std::sqrt(bc2) + eps);
  }
}

std::vector<double> round_all(DType d, std::vector<double> v) {
  for (double& x : v) x = ref::round_to(d, x);
  return v;
}

Tensor tensor_like(const Tensor& like, const std::vector<double>& v) {
  Tensor t = Tensor::zeros_host(like.dtype(), like.shape());
  for (int64_t i = 0; i < t.numel(); ++i) ref::store(t, i, v[static_cast<size_t>(i)]);
  return t;
}

RefFn optim_ref(Kind kind) {
  return [kind](const Call& c, const Metas&) {
    Outcome o;
    o.stored = c.stored;
    const auto& params = std::get<TensorList>(*c.find("params"));
    const auto& grads = std::get<TensorList>(*c.find("grads"));
    if (scalar(c, "found_inf", 0) != 0) return o;  // the step is skipped
    const double scale = scalar(c, "grad_scale", 1);
    for (size_t k = 0; k < params.tensors.size(); ++k) {
      const Tensor& p = params.tensors[k];
      const DType d = p.dtype();
      Slot s;
      for (int64_t i = 0; i < p.numel(); ++i) {
        s.p.push_back(ref::value(p, i));
        s.g.push_back(ref::value(grads.tensors[k], i));
      }
      for (int t = 0; t < c.steps; ++t) {
        step_one(kind, c, s, scale);
        s.p = round_all(d, s.p);
        for (auto& [key, v] : s.state) v = round_all(d, v);
      }
      const std::string name = params.names[k].substr(std::string("$stored/").size());
      o.stored[name] = tensor_like(p, s.p);
      for (const auto& [key, v] : s.state) o.stored["opt/" + name + "/" + key] = tensor_like(p, v);
      if (kind != Kind::kSgd) o.stored["opt/" + name + "/step"] = tensor_of(DType::kFloat32, {}, {s.step});
    }
    return o;
  };
}

Tensor one_element(double v) {
  return tensor_of(DType::kFloat32, {}, {v});
}

void add_variants(OpCases& c, const std::vector<std::pair<std::string, Attrs>>& hypers,
                  const std::vector<Shape>& shapes = {{3, 4}, {5}}) {
  for (const auto& [name, h] : hypers) {
    c.variant(name, [shapes, h = h](DType d, Rng& g) { return optim_call(d, g, shapes, h); });
  }
  const Attrs first = hypers.front().second;
  c.variant("grad_scale", [shapes, first](DType d, Rng& g) {
    return optim_call(d, g, shapes, first).arg("grad_scale", one_element(4.0));
  });
  c.variant("found_inf", [shapes, first](DType d, Rng& g) {
    return optim_call(d, g, shapes, first).arg("found_inf", one_element(1.0));
  });
  c.variant("one step, empty param", [first](DType d, Rng& g) { return optim_call(d, g, {{0}, {2, 2}}, first, 1); });
  c.variant("large",
            [first](DType d, Rng& g) {
              return optim_call(d, g, {{70001}, {3}}, first);
            },
            {DType::kFloat32, DType::kFloat16});
}

}  // namespace

void add_optim_cases(CaseTable& t) {
  OpCases& sgd = t.add("optim.sgd", optim_dtypes());
  sgd.tolerance_ulps(8).reference(optim_ref(Kind::kSgd));
  add_variants(sgd,
               {{"plain", {{"lr", Attr(0.1)}}},
                {"momentum, nesterov, weight decay",
                 {{"lr", Attr(0.05)}, {"momentum", Attr(0.9)}, {"nesterov", Attr(true)}, {"weight_decay", Attr(0.01)}}},
                {"dampening, maximize",
                 {{"lr", Attr(0.1)}, {"momentum", Attr(0.5)}, {"dampening", Attr(0.3)}, {"maximize", Attr(true)}}}});
  // A one-element parameter list without state (plain SGD keeps none).
  sgd.variant("no state", [](DType d, Rng& g) {
    Call c = optim_call(d, g, {{6}}, {{"lr", Attr(0.2)}});
    c.args.erase(c.args.begin() + 2);  // "state"
    return c;
  });

  for (const bool w : {false, true}) {
    OpCases& c = t.add(w ? "optim.adamw" : "optim.adam", optim_dtypes());
    c.tolerance_ulps(8).reference(optim_ref(w ? Kind::kAdamW : Kind::kAdam));
    add_variants(c,
                 {{"defaults, lr 0.01", {{"lr", Attr(0.01)}}},
                  {"amsgrad, weight decay", {{"lr", Attr(0.02)}, {"amsgrad", Attr(true)}, {"weight_decay", Attr(0.1)}}},
                  {"betas, eps, maximize",
                   {{"betas", Attr(std::vector<double>{0.8, 0.9})}, {"eps", Attr(1e-3)}, {"maximize", Attr(true)}}}});
  }

  OpCases& ada = t.add("optim.adagrad", optim_dtypes());
  ada.tolerance_ulps(8).reference(optim_ref(Kind::kAdagrad));
  add_variants(ada,
               {{"lr 0.1", {{"lr", Attr(0.1)}}},
                {"lr decay, weight decay, initial accumulator",
                 {{"lr_decay", Attr(0.1)}, {"weight_decay", Attr(0.05)}, {"initial_accumulator_value", Attr(0.2)}}},
                {"maximize, eps", {{"maximize", Attr(true)}, {"eps", Attr(1e-4)}}}});

  // Muon: 2-D parameters only; no AMP arguments.
  OpCases& muon = t.add("optim.muon", optim_dtypes());
  muon.tolerance_ulps(64);
  const std::vector<Shape> mats = {{4, 6}, {5, 3}};
  for (const auto& [name, h] : std::vector<std::pair<std::string, Attrs>>{
           {"defaults, lr 0.02", {{"lr", Attr(0.02)}}},
           {"plain momentum, match_rms_adamw",
            {{"nesterov", Attr(false)}, {"adjust_lr_fn", Attr("match_rms_adamw")}, {"weight_decay", Attr(0.0)}}},
           {"ns_steps 2", {{"ns_steps", Attr(int64_t{2})}, {"momentum", Attr(0.5)}}}}) {
    muon.variant(name, [mats, h = h](DType d, Rng& g) { return optim_call(d, g, mats, h); });
  }
  muon.variant("large",
               [](DType d, Rng& g) {
                 return optim_call(d, g, {{64, 128}}, {{"lr", Attr(0.01)}});
               },
               {DType::kFloat32});
}

}  // namespace tensord::conformance
