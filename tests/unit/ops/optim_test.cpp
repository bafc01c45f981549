// Fused optimizers (ops/cpu/optim.cpp, optim_loop.cpp, optim_muon.cpp):
// (Long file: the five optimizers share the double-precision references and
// step drivers at its top.)
// update formulas against double-precision references written from
// torch.optim over several steps, state creation, validation leaving the
// store untouched, AMP found_inf / grad_scale, narrow dtypes bit-exact
// against a scalar float replica, and the parallel split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ops/convert.h"
#include "ops/cpu/thread_pool.h"
#include "ops/error.h"
#include "ops/kernels/float_conv.h"
#include "ops/op_registry.h"
#include "ops/tensor.h"

namespace tensord {
namespace {

// A tenant's store as a map; writes are buffered and committed only when the
// step succeeds (like the executor's PendingStore and the engine's commit).
class MapStore final : public StoredIO {
 public:
  std::map<std::string, Tensor> committed;
  std::vector<std::pair<std::string, Tensor>> pending;
  std::optional<Tensor> read(const std::string& name) const override {
    for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
      if (it->first == name) return it->second;
    }
    auto it = committed.find(name);
    if (it == committed.end()) return std::nullopt;
    return it->second;
  }
  void write(const std::string& name, Tensor t) override { pending.emplace_back(name, std::move(t)); }
  void commit() {
    for (auto& [n, t] : pending) committed[n] = t;
    pending.clear();
  }
};

Tensor make(DType dt, Shape shape, const std::vector<double>& v) {
  Tensor t = Tensor::empty_host(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) store_from_double(dt, t.data(), i, v[static_cast<size_t>(i)]);
  return t;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = load_as_double(t.dtype(), t.data(), i);
  return out;
}

std::vector<double> randn(size_t n, std::mt19937& rng, double scale = 1.0) {
  std::normal_distribution<double> d(0.0, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Rounds through the dtype (what the kernel sees as input).
std::vector<double> rounded(DType dt, const std::vector<double>& v) {
  return values(make(dt, {static_cast<int64_t>(v.size())}, v));
}

struct Call {
  std::string op;
  std::vector<std::string> params;  // stored names
  std::vector<Tensor> grads;
  std::vector<std::pair<std::string, Attr>> kwargs;
  std::optional<Tensor> grad_scale, found_inf;
  std::vector<std::string> param_arg_names;  // override ("x" for a non-stored param)
};

// Binds like the program binder (defaults for omitted params), runs infer,
// then the cpu kernel; commits on success. Rethrows the kernel's Error.
void step(MapStore& st, const Call& c, ThreadPool* pool = nullptr) {
  const OpDef* op = OpRegistry::global().find(c.op);
  ASSERT_NE(op, nullptr) << c.op;
  OpArgs<Tensor> a;
  a.op = op;
  a.node = "opt";
  a.tensors.resize(op->params.size());
  a.attrs.resize(op->params.size());
  a.names.resize(op->params.size());
  for (size_t i = 0; i < op->params.size(); ++i) a.attrs[i] = op->params[i].default_value;
  for (size_t i = 0; i < c.params.size(); ++i) {
    std::optional<Tensor> t = st.read(c.params[i]);
    a.tensors[0].push_back(t ? *t : Tensor::zeros_host(DType::kFloat32, {1}));
    a.names[0].push_back(c.param_arg_names.empty() ? "$stored/" + c.params[i] : c.param_arg_names[i]);
  }
  for (const auto& g : c.grads) {
    a.tensors[1].push_back(g);
    a.names[1].push_back("g");
  }
  for (const auto& [k, v] : c.kwargs) {
    const int pi = op->param_index(k);
    ASSERT_GE(pi, 0) << k;
    a.attrs[static_cast<size_t>(pi)] = v;
  }
  if (c.grad_scale) a.tensors[static_cast<size_t>(op->param_index("grad_scale"))].push_back(*c.grad_scale);
  if (c.found_inf) a.tensors[static_cast<size_t>(op->param_index("found_inf"))].push_back(*c.found_inf);

  OpArgs<TensorMeta> m;
  m.op = op;
  m.node = a.node;
  m.attrs = a.attrs;
  m.names = a.names;
  m.tensors.resize(a.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    for (const auto& t : a.tensors[i]) m.tensors[i].push_back(t.meta());
  }
  EXPECT_TRUE(op->infer(m).empty());
  OpContext ctx;
  ctx.pool = pool;
  ctx.stored = &st;
  auto out = op->kernels.at("cpu")(ctx, a);
  EXPECT_TRUE(out.empty());
  st.commit();
}

double max_rel(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num = std::max(num, std::abs(got[i] - want[i]));
    den = std::max(den, std::abs(want[i]));
  }
  return den == 0 ? num : num / den;
}

void expect_close(const MapStore& st, const std::string& name, const std::vector<double>& want, double tol = 2e-6) {
  auto t = st.read(name);
  ASSERT_TRUE(t) << name << " missing";
  auto got = values(*t);
  ASSERT_EQ(got.size(), want.size()) << name;
  EXPECT_LE(max_rel(got, want), tol) << name;
}

// ---------------------------------------------------------------- references (double, torch.optim's formulas)

struct AdamRef {
  double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0;
  bool adamw = false, amsgrad = false, maximize = false;
  std::vector<double> p, m, v, vmax;
  int t = 0;
  void step(std::vector<double> g) {
    ++t;
    if (m.empty()) m = v = vmax = std::vector<double>(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      if (maximize) g[i] = -g[i];
      if (adamw) {
        p[i] *= 1 - lr * wd;
      } else {
        g[i] += wd * p[i];
      }
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
      double d = v[i];
      if (amsgrad) d = vmax[i] = std::max(vmax[i], v[i]);
      p[i] -= lr / bc1 * m[i] / (std::sqrt(d) / std::sqrt(bc2) + eps);
    }
  }
};

struct SgdRef {
  double lr = 1e-3, momentum = 0, dampening = 0, wd = 0;
  bool nesterov = false, maximize = false;
  std::vector<double> p, buf;
  void step(std::vector<double> g) {
    const bool first = buf.empty();
    if (momentum != 0 && first) buf.resize(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      if (maximize) g[i] = -g[i];
      g[i] += wd * p[i];
      if (momentum != 0) {
        buf[i] = first ? g[i] : momentum * buf[i] + (1 - dampening) * g[i];
        g[i] = nesterov ? g[i] + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * g[i];
    }
  }
};

struct AdagradRef {
  double lr = 1e-2, lr_decay = 0, wd = 0, init = 0, eps = 1e-10;
  bool maximize = false;
  std::vector<double> p, sum;
  int t = 0;
  void step(std::vector<double> g) {
    ++t;
    if (sum.empty()) sum.assign(p.size(), init);
    const double clr = lr / (1 + (t - 1) * lr_decay);
    for (size_t i = 0; i < p.size(); ++i) {
      if (maximize) g[i] = -g[i];
      g[i] += wd * p[i];
      sum[i] += g[i] * g[i];
      p[i] -= clr * g[i] / (std::sqrt(sum[i]) + eps);
    }
  }
};

struct MuonRef {
  double lr = 1e-3, wd = 0.1, momentum = 0.95, eps = 1e-7, a = 3.4445, b = -4.7750, c = 2.0315;
  bool nesterov = true, match_rms = false;
  int ns_steps = 5;
  int64_t rows = 0, cols = 0;
  std::vector<double> p, buf;
  void step(const std::vector<double>& g) {
    if (buf.empty()) buf.assign(p.size(), 0.0);
    std::vector<double> u(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      buf[i] += (1 - momentum) * (g[i] - buf[i]);
      u[i] = nesterov ? g[i] + momentum * (buf[i] - g[i]) : buf[i];
    }
    const bool tall = rows > cols;
    const int64_t m = tall ? cols : rows, n = tall ? rows : cols;
    std::vector<double> x(p.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t q = 0; q < cols; ++q) x[tall ? q * rows + r : r * cols + q] = u[r * cols + q];
    double nrm = 0;
    for (double e : x) nrm += e * e;
    nrm = std::max(std::sqrt(nrm), eps);
    for (double& e : x) e /= nrm;
    for (int s = 0; s < ns_steps; ++s) {
      std::vector<double> gram(m * m, 0.0), upd(m * m), y(x.size(), 0.0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < m; ++j)
          for (int64_t k = 0; k < n; ++k) gram[i * m + j] += x[i * n + k] * x[j * n + k];
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < m; ++j) {
          double gg = 0;
          for (int64_t k = 0; k < m; ++k) gg += gram[i * m + k] * gram[k * m + j];
          upd[i * m + j] = b * gram[i * m + j] + c * gg;
        }
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t k = 0; k < m; ++k) acc += upd[i * m + k] * x[k * n + j];
          y[i * n + j] = a * x[i * n + j] + acc;
        }
      x = y;
    }
    const double A = static_cast<double>(rows), B = static_cast<double>(cols);
    const double adj = match_rms ? 0.2 * std::sqrt(std::max(A, B)) : std::sqrt(std::max(1.0, A / B));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t q = 0; q < cols; ++q) {
        const size_t i = static_cast<size_t>(r * cols + q);
        p[i] = p[i] * (1 - lr * wd) - lr * adj * x[tall ? q * rows + r : r * cols + q];
      }
  }
};

SgdRef sgd_ref(double lr, double momentum = 0, double dampening = 0, double wd = 0, bool nesterov = false,
               bool maximize = false) {
  SgdRef r;
  r.lr = lr;
  r.momentum = momentum;
  r.dampening = dampening;
  r.wd = wd;
  r.nesterov = nesterov;
  r.maximize = maximize;
  return r;
}

AdagradRef adagrad_ref(double lr = 1e-2, double lr_decay = 0, double wd = 0, double init = 0, double eps = 1e-10,
                       bool maximize = false) {
  AdagradRef r;
  r.lr = lr;
  r.lr_decay = lr_decay;
  r.wd = wd;
  r.init = init;
  r.eps = eps;
  r.maximize = maximize;
  return r;
}

// ---------------------------------------------------------------- fixtures

const std::vector<int64_t> kSizes = {1000, 37, 1, 4099};  // tails, a lone element, several blocks

struct Fixture {
  MapStore st;
  std::vector<std::string> names;
  std::vector<std::vector<double>> p0;
  std::mt19937 rng{1234};
  explicit Fixture(DType dt = DType::kFloat32, const std::vector<int64_t>& sizes = kSizes) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      names.push_back("model/w" + std::to_string(i));
      auto v = rounded(dt, randn(static_cast<size_t>(sizes[i]), rng));
      p0.push_back(v);
      st.committed[names.back()] = make(dt, {sizes[i]}, v);
    }
  }
  std::vector<std::vector<double>> grads(DType dt) {
    std::vector<std::vector<double>> g;
    for (const auto& p : p0) g.push_back(rounded(dt, randn(p.size(), rng, 0.5)));
    return g;
  }
  static std::vector<Tensor> tensors(DType dt, const std::vector<std::vector<double>>& g) {
    std::vector<Tensor> out;
    for (const auto& v : g) out.push_back(make(dt, {static_cast<int64_t>(v.size())}, v));
    return out;
  }
};

using KW = std::vector<std::pair<std::string, Attr>>;

// ---------------------------------------------------------------- Adam / AdamW

struct AdamCase {
  const char* op;
  KW kw;
  AdamRef ref;
};

class AdamSteps : public ::testing::TestWithParam<int> {};

TEST_P(AdamSteps, MatchesReferenceOverFourSteps) {
  std::vector<AdamCase> cases;
  {
    AdamCase c{"optim.adam", {}, {}};
    cases.push_back(c);
  }
  {
    AdamCase c{"optim.adam", {{"amsgrad", true}, {"lr", 1e-2}}, {}};
    c.ref.amsgrad = true;
    c.ref.lr = 1e-2;
    cases.push_back(c);
  }
  {
    AdamCase c{
        "optim.adam", {{"maximize", true}, {"weight_decay", 0.1}, {"betas", std::vector<double>{0.8, 0.99}}}, {}};
    c.ref.maximize = true;
    c.ref.wd = 0.1;
    c.ref.b1 = 0.8;
    c.ref.b2 = 0.99;
    cases.push_back(c);
  }
  {
    AdamCase c{"optim.adamw", {}, {}};
    c.ref.adamw = true;
    c.ref.wd = 1e-2;  // AdamW's default
    cases.push_back(c);
  }
  {
    AdamCase c{"optim.adamw", {{"amsgrad", true}, {"weight_decay", 0.5}, {"eps", 1e-3}, {"lr", 0.05}}, {}};
    c.ref.adamw = true;
    c.ref.amsgrad = true;
    c.ref.wd = 0.5;
    c.ref.eps = 1e-3;
    c.ref.lr = 0.05;
    cases.push_back(c);
  }
  const AdamCase& c = cases[static_cast<size_t>(GetParam())];
  Fixture s;
  std::vector<AdamRef> refs(s.names.size(), c.ref);
  for (size_t i = 0; i < refs.size(); ++i) refs[i].p = s.p0[i];
  ThreadPool pool(2);
  for (int it = 0; it < 4; ++it) {
    auto g = s.grads(DType::kFloat32);
    KW kw = c.kw;
    kw.emplace_back("state", "opt/a");
    step(s.st, Call{c.op, s.names, Fixture::tensors(DType::kFloat32, g), kw, {}, {}, {}}, &pool);
    for (size_t i = 0; i < refs.size(); ++i) refs[i].step(g[i]);
  }
  for (size_t i = 0; i < refs.size(); ++i) {
    const std::string pre = "opt/a/" + s.names[i] + "/";
    expect_close(s.st, s.names[i], refs[i].p);
    expect_close(s.st, pre + "exp_avg", refs[i].m);
    expect_close(s.st, pre + "exp_avg_sq", refs[i].v);
    EXPECT_EQ(values(*s.st.read(pre + "step")), std::vector<double>{4.0});
    EXPECT_EQ(s.st.read(pre + "step")->dtype(), DType::kFloat32);
    EXPECT_EQ(s.st.read(pre + "step")->dim(), 0);
    if (c.ref.amsgrad) {
      expect_close(s.st, pre + "max_exp_avg_sq", refs[i].vmax);
    } else {
      EXPECT_FALSE(s.st.read(pre + "max_exp_avg_sq"));
    }
  }
}
INSTANTIATE_TEST_SUITE_P(Optim, AdamSteps, ::testing::Range(0, 5));

// ---------------------------------------------------------------- SGD

class SgdSteps : public ::testing::TestWithParam<int> {};

TEST_P(SgdSteps, MatchesReferenceOverFourSteps) {
  std::vector<std::pair<KW, SgdRef>> cases;
  cases.push_back({{{"lr", 0.1}}, sgd_ref(0.1)});
  cases.push_back({{{"lr", 0.1}, {"momentum", 0.9}}, sgd_ref(0.1, 0.9)});
  cases.push_back(
      {{{"lr", 0.05}, {"momentum", 0.9}, {"dampening", 0.3}, {"weight_decay", 0.01}}, sgd_ref(0.05, 0.9, 0.3, 0.01)});
  cases.push_back({{{"lr", 0.05}, {"momentum", 0.8}, {"nesterov", true}, {"maximize", true}},
                   sgd_ref(0.05, 0.8, 0, 0, true, true)});
  cases.push_back({{{"lr", 0.02}, {"weight_decay", 0.3}, {"maximize", true}}, sgd_ref(0.02, 0, 0, 0.3, false, true)});
  const auto& [kw0, ref0] = cases[static_cast<size_t>(GetParam())];
  Fixture s;
  std::vector<SgdRef> refs(s.names.size(), ref0);
  for (size_t i = 0; i < refs.size(); ++i) refs[i].p = s.p0[i];
  ThreadPool pool(2);
  for (int it = 0; it < 4; ++it) {
    auto g = s.grads(DType::kFloat32);
    KW kw = kw0;
    kw.emplace_back("state", "opt/s");
    step(s.st, Call{"optim.sgd", s.names, Fixture::tensors(DType::kFloat32, g), kw, {}, {}, {}}, &pool);
    for (size_t i = 0; i < refs.size(); ++i) refs[i].step(g[i]);
  }
  for (size_t i = 0; i < refs.size(); ++i) {
    expect_close(s.st, s.names[i], refs[i].p);
    const std::string buf = "opt/s/" + s.names[i] + "/momentum_buffer";
    if (ref0.momentum != 0) {
      expect_close(s.st, buf, refs[i].buf);
    } else {
      EXPECT_FALSE(s.st.read(buf));
    }
    EXPECT_FALSE(s.st.read("opt/s/" + s.names[i] + "/step"));  // SGD keeps no step
  }
}
INSTANTIATE_TEST_SUITE_P(Optim, SgdSteps, ::testing::Range(0, 5));

TEST(OptimSgd, PlainSgdNeedsNoStatePrefix) {
  Fixture s(DType::kFloat32, {5});
  auto g = s.grads(DType::kFloat32);
  step(s.st, Call{"optim.sgd", s.names, Fixture::tensors(DType::kFloat32, g), {{"lr", 0.5}}, {}, {}, {}});
  SgdRef r = sgd_ref(0.5);
  r.p = s.p0[0];
  r.step(g[0]);
  expect_close(s.st, s.names[0], r.p);
  EXPECT_EQ(s.st.committed.size(), 1u);
}

// ---------------------------------------------------------------- Adagrad

class AdagradSteps : public ::testing::TestWithParam<int> {};

TEST_P(AdagradSteps, MatchesReferenceOverFourSteps) {
  std::vector<std::pair<KW, AdagradRef>> cases;
  cases.push_back({{}, adagrad_ref()});
  cases.push_back({{{"lr_decay", 0.1}, {"initial_accumulator_value", 0.5}}, adagrad_ref(1e-2, 0.1, 0, 0.5)});
  cases.push_back({{{"weight_decay", 0.2}, {"maximize", true}, {"eps", 1e-3}, {"lr", 0.1}},
                   adagrad_ref(0.1, 0, 0.2, 0, 1e-3, true)});
  const auto& [kw0, ref0] = cases[static_cast<size_t>(GetParam())];
  Fixture s;
  std::vector<AdagradRef> refs(s.names.size(), ref0);
  for (size_t i = 0; i < refs.size(); ++i) refs[i].p = s.p0[i];
  ThreadPool pool(2);
  for (int it = 0; it < 4; ++it) {
    auto g = s.grads(DType::kFloat32);
    KW kw = kw0;
    kw.emplace_back("state", "opt/g");
    step(s.st, Call{"optim.adagrad", s.names, Fixture::tensors(DType::kFloat32, g), kw, {}, {}, {}}, &pool);
    for (size_t i = 0; i < refs.size(); ++i) refs[i].step(g[i]);
  }
  for (size_t i = 0; i < refs.size(); ++i) {
    expect_close(s.st, s.names[i], refs[i].p);
    expect_close(s.st, "opt/g/" + s.names[i] + "/sum", refs[i].sum);
    EXPECT_EQ(values(*s.st.read("opt/g/" + s.names[i] + "/step")), std::vector<double>{4.0});
  }
}
INSTANTIATE_TEST_SUITE_P(Optim, AdagradSteps, ::testing::Range(0, 3));

// ---------------------------------------------------------------- Muon

TEST(OptimMuon, MatchesFloat64ReferenceWideAndTall) {
  for (int variant = 0; variant < 3; ++variant) {
    MapStore st;
    std::mt19937 rng(7 + variant);
    const std::vector<std::pair<int64_t, int64_t>> shapes = {{8, 20}, {24, 6}, {5, 5}};
    std::vector<std::string> names;
    std::vector<MuonRef> refs;
    for (size_t i = 0; i < shapes.size(); ++i) {
      names.push_back("m" + std::to_string(i));
      MuonRef r;
      r.rows = shapes[i].first;
      r.cols = shapes[i].second;
      r.p = rounded(DType::kFloat32, randn(static_cast<size_t>(r.rows * r.cols), rng));
      if (variant == 1) r.nesterov = false;
      if (variant == 2) r.match_rms = true;
      r.lr = 0.02;
      st.committed[names.back()] = make(DType::kFloat32, {r.rows, r.cols}, r.p);
      refs.push_back(r);
    }
    KW kw = {{"state", "opt/m"}, {"lr", 0.02}};
    if (variant == 1) kw.emplace_back("nesterov", false);
    if (variant == 2) kw.emplace_back("adjust_lr_fn", "match_rms_adamw");
    ThreadPool pool(2);
    for (int it = 0; it < 3; ++it) {
      std::vector<Tensor> gs;
      for (auto& r : refs) {
        auto g = rounded(DType::kFloat32, randn(r.p.size(), rng));
        gs.push_back(make(DType::kFloat32, {r.rows, r.cols}, g));
        r.step(g);
      }
      step(st, Call{"optim.muon", names, gs, kw, {}, {}, {}}, &pool);
    }
    for (size_t i = 0; i < refs.size(); ++i) {
      // Newton-Schulz in float32: about 1e-6 relative on the update, which
      // is lr-scaled against the parameter.
      expect_close(st, names[i], refs[i].p, 2e-6);
      expect_close(st, "opt/m/" + names[i] + "/momentum_buffer", refs[i].buf, 2e-6);
    }
  }
}

// ---------------------------------------------------------------- state, validation, AMP

TEST(OptimState, CreatedOnFirstStepWithParamDtypeAndShape) {
  MapStore st;
  st.committed["w"] = make(DType::kBFloat16, {2, 3}, {1, 2, 3, 4, 5, 6});
  step(st, Call{"optim.adam",
                {"w"},
                {make(DType::kBFloat16, {2, 3}, {1, 1, 1, 1, 1, 1})},
                {{"state", "s"}, {"amsgrad", true}},
                {},
                {},
                {}});
  for (const char* k : {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}) {
    auto t = st.read(std::string("s/w/") + k);
    ASSERT_TRUE(t) << k;
    EXPECT_EQ(t->dtype(), DType::kBFloat16);
    EXPECT_EQ(t->shape(), (Shape{2, 3}));
  }
  EXPECT_EQ(st.read("s/w/step")->dtype(), DType::kFloat32);
  EXPECT_EQ(values(*st.read("s/w/step")), std::vector<double>{1.0});
}

// Each malformed call throws with the expected code and commits nothing.
TEST(OptimValidation, ErrorsLeaveTheStoreUntouched) {
  struct Bad {
    Call call;
    ErrorCode code;
  };
  auto f32 = [](Shape s) {
    Tensor t = Tensor::zeros_host(DType::kFloat32, s);
    return t;
  };
  std::vector<Bad> bad = {
      {{"optim.adam", {"a", "b"}, {f32({3})}, {{"state", "s"}}, {}, {}, {}}, ErrorCode::kInvalidArgument},
      {{"optim.adam", {"a", "b"}, {f32({3}), f32({4})}, {{"state", "s"}}, {}, {}, {}}, ErrorCode::kShapeMismatch},
      {{"optim.adam", {"a"}, {Tensor::zeros_host(DType::kFloat64, {3})}, {{"state", "s"}}, {}, {}, {}},
       ErrorCode::kDtypeMismatch},
      {{"optim.adam", {"a"}, {f32({3})}, {{"state", "s"}}, {}, {}, {"x"}}, ErrorCode::kInvalidArgument},
      {{"optim.adam", {"a"}, {f32({3})}, {{"state", "s"}, {"lr", -1.0}}, {}, {}, {}}, ErrorCode::kInvalidArgument},
      {{"optim.adam", {"a"}, {f32({3})}, {{"state", "s"}, {"betas", std::vector<double>{0.9, 1.0}}}, {}, {}, {}},
       ErrorCode::kInvalidArgument},
      {{"optim.adam", {"a"}, {f32({3})}, {}, {}, {}, {}}, ErrorCode::kInvalidArgument},  // no state prefix
      {{"optim.adam", {"a"}, {f32({3})}, {{"state", "../x"}}, {}, {}, {}}, ErrorCode::kInvalidArgument},
      {{"optim.adam", {"a", "a"}, {f32({3}), f32({3})}, {{"state", "s"}}, {}, {}, {}}, ErrorCode::kInvalidArgument},
      {{"optim.sgd",
        {"a"},
        {f32({3})},
        {{"momentum", 0.9}, {"dampening", 0.1}, {"nesterov", true}, {"state", "s"}},
        {},
        {},
        {}},
       ErrorCode::kInvalidArgument},
      {{"optim.sgd", {"a"}, {f32({3})}, {{"momentum", 0.9}}, {}, {}, {}}, ErrorCode::kInvalidArgument},
      {{"optim.adagrad", {"a"}, {f32({3})}, {{"state", "s"}, {"lr_decay", -0.1}}, {}, {}, {}},
       ErrorCode::kInvalidArgument},
      {{"optim.muon", {"a"}, {f32({3})}, {{"state", "s"}}, {}, {}, {}}, ErrorCode::kInvalidArgument},
      {{"optim.muon", {"m"}, {f32({2, 2})}, {{"state", "s"}, {"adjust_lr_fn", "nope"}}, {}, {}, {}},
       ErrorCode::kInvalidArgument},
      // existing state of the wrong shape (checked in the kernel, before any write)
      {{"optim.adam", {"a", "b"}, {f32({3}), f32({3})}, {{"state", "bad"}}, {}, {}, {}}, ErrorCode::kInvalidArgument},
      {{"optim.adam", {"a"}, {f32({3})}, {{"state", "s"}}, f32({2}), {}, {}}, ErrorCode::kInvalidArgument},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    MapStore st;
    st.committed["a"] = make(DType::kFloat32, {3}, {1, 2, 3});
    st.committed["b"] = make(DType::kFloat32, {3}, {4, 5, 6});
    st.committed["m"] = make(DType::kFloat32, {2, 2}, {1, 2, 3, 4});
    st.committed["bad/b/exp_avg"] = make(DType::kFloat32, {4}, {0, 0, 0, 0});
    const auto before = st.committed;
    try {
      step(st, bad[i].call);
      ADD_FAILURE() << "case " << i << " did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), bad[i].code) << "case " << i << ": " << e.message();
      EXPECT_NE(e.message().find(bad[i].call.op), std::string::npos) << e.message();
    }
    EXPECT_TRUE(st.pending.empty()) << "case " << i;
    ASSERT_EQ(st.committed.size(), before.size()) << "case " << i;
    for (const auto& [n, t] : before) {
      EXPECT_EQ(st.committed.at(n).data(), t.data()) << "case " << i << " replaced " << n;
      EXPECT_EQ(values(st.committed.at(n)), values(t)) << "case " << i << " modified " << n;
    }
  }
}

TEST(OptimAmp, FoundInfSkipsEverythingAndGradScaleDivides) {
  for (const char* op : {"optim.adam", "optim.adamw", "optim.sgd", "optim.adagrad"}) {
    MapStore st;
    st.committed["w"] = make(DType::kFloat32, {4}, {1, -2, 3, -4});
    const KW kw = {{"state", "s"}, {"momentum", 0.0}};
    KW kwo;
    for (const auto& p : kw) {
      if (std::string(op) == "optim.sgd" || p.first != "momentum") kwo.push_back(p);
    }
    const Tensor g = make(DType::kFloat32, {4}, {0.5, 0.25, -1, 2});
    const Tensor g_scaled = make(DType::kFloat32, {4}, {4, 2, -8, 16});  // g * 8
    // A clean step to create state; then a skipped one.
    step(st, Call{op, {"w"}, {g}, kwo, {}, {}, {}});
    const auto after_one = st.committed;
    step(st, Call{op, {"w"}, {g}, kwo, {}, make(DType::kFloat32, {}, {1.0}), {}});
    for (const auto& [n, t] : after_one) EXPECT_EQ(st.committed.at(n).data(), t.data()) << op << " " << n;
    // grad_scale 8 with 8x gradients == the plain step.
    MapStore a = st, b = st;
    step(a, Call{op, {"w"}, {g}, kwo, {}, {}, {}});
    step(b, Call{op, {"w"}, {g_scaled}, kwo, make(DType::kFloat32, {}, {8.0}), make(DType::kFloat32, {}, {0.0}), {}});
    for (const auto& [n, t] : a.committed) EXPECT_EQ(values(t), values(b.committed.at(n))) << op << " " << n;
  }
}

// ---------------------------------------------------------------- narrow dtypes: bit-exact vs a float replica

float rt(DType dt, float x) {
  return dt == DType::kBFloat16 ? kernels::bf16_to_f32(kernels::f32_to_bf16(x))
                                : kernels::f16_to_f32(kernels::f32_to_f16(x));
}

TEST(OptimNarrow, AdamWInBf16AndF16MatchesFloatMathRoundedEachStep) {
  for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
    Fixture s(dt, {1000, 37});
    std::vector<std::vector<float>> p(2), m(2), v(2);
    for (size_t i = 0; i < 2; ++i) {
      p[i].assign(s.p0[i].begin(), s.p0[i].end());
      m[i].assign(p[i].size(), 0.f);
      v[i].assign(p[i].size(), 0.f);
    }
    const float lr = 1e-2f, wd = 1e-2f;
    for (int t = 1; t <= 3; ++t) {
      auto g = s.grads(dt);
      step(s.st, Call{"optim.adamw", s.names, Fixture::tensors(dt, g), {{"state", "o"}, {"lr", 1e-2}}, {}, {}, {}});
      const double bc1 = 1 - std::pow(0.9, t), bc2 = 1 - std::pow(0.999, t);
      for (size_t i = 0; i < 2; ++i) {
        for (size_t j = 0; j < p[i].size(); ++j) {
          const float gj = static_cast<float>(g[i][j]);
          float pj = p[i][j] * static_cast<float>(1 - 1e-2 * 1e-2);
          const float mj = m[i][j] + static_cast<float>(1 - 0.9) * (gj - m[i][j]);
          const float vj = v[i][j] * 0.999f + static_cast<float>(1 - 0.999) * gj * gj;
          const float d = std::sqrt(vj) / static_cast<float>(std::sqrt(bc2)) + 1e-8f;
          pj = pj + static_cast<float>(-(1e-2 / bc1)) * mj / d;
          p[i][j] = rt(dt, pj);
          m[i][j] = rt(dt, mj);
          v[i][j] = rt(dt, vj);
        }
      }
      (void)lr;
      (void)wd;
    }
    for (size_t i = 0; i < 2; ++i) {
      auto gp = values(*s.st.read(s.names[i]));
      auto gm = values(*s.st.read("o/" + s.names[i] + "/exp_avg"));
      auto gv = values(*s.st.read("o/" + s.names[i] + "/exp_avg_sq"));
      EXPECT_EQ(s.st.read(s.names[i])->dtype(), dt);
      for (size_t j = 0; j < p[i].size(); ++j) {
        ASSERT_EQ(gp[j], p[i][j]) << dtype_name(dt) << " param " << i << "[" << j << "]";
        ASSERT_EQ(gm[j], m[i][j]) << dtype_name(dt) << " exp_avg " << i << "[" << j << "]";
        ASSERT_EQ(gv[j], v[i][j]) << dtype_name(dt) << " exp_avg_sq " << i << "[" << j << "]";
      }
    }
  }
}

// ---------------------------------------------------------------- the parallel split

TEST(OptimSplit, PoolAndInlineGiveTheSameBits) {
  for (const char* op : {"optim.adam", "optim.sgd", "optim.adagrad"}) {
    Fixture one(DType::kFloat32, {300001, 17, 65536, 3});
    Fixture two(DType::kFloat32, {300001, 17, 65536, 3});
    ThreadPool pool(3);
    for (int it = 0; it < 2; ++it) {
      auto g = one.grads(DType::kFloat32);
      two.grads(DType::kFloat32);  // keep the generators in step
      const KW kw = {{"state", "s"}, {"lr", 0.1}};
      KW kwo = kw;
      if (std::string(op) == "optim.sgd") kwo.emplace_back("momentum", 0.9);
      step(one.st, Call{op, one.names, Fixture::tensors(DType::kFloat32, g), kwo, {}, {}, {}});
      step(two.st, Call{op, two.names, Fixture::tensors(DType::kFloat32, g), kwo, {}, {}, {}}, &pool);
    }
    for (const auto& [n, t] : one.st.committed) EXPECT_EQ(values(t), values(two.st.committed.at(n))) << op << " " << n;
  }
}

}  // namespace
}  // namespace tensord
