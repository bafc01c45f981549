// associative_scan's parallel (Hillis-Steele) path against sequential
// references: sums, products, max, non-commutative combines (affine maps,
// 2x2 matrix products written elementwise), reverse and dim, multi-input
// and mixed-dtype combines, the fallback for combines that do not batch,
// the number of combine_fn invocations, cancellation and deadlines.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "graphs/control_flow.h"
#include "graphs/control_flow_run.h"
#include "graphs/executor.h"
#include "ops/error.h"
#include "tests/unit/graphs/exec_fixture.h"
#include "tests/unit/graphs/program_builder.h"

namespace tensord {
namespace {
using namespace testing_util;

template <class T>
Tensor make(DType dt, Shape s, const std::vector<T>& v) {
  Tensor t = Tensor::empty_host(dt, std::move(s));
  std::memcpy(t.data(), v.data(), v.size() * sizeof(T));
  return t;
}

template <class T>
std::vector<T> values(const Tensor& t) {
  const T* p = t.data_ptr<T>();
  return std::vector<T>(p, p + t.numel());
}

// Restores the process-wide switch when a test ends.
struct ParallelSwitch {
  explicit ParallelSwitch(bool on) { set_associative_scan_parallel(on); }
  ~ParallelSwitch() { set_associative_scan_parallel(true); }
};

int64_t levels_for(int64_t n) {
  int64_t l = 0;
  for (int64_t d = 1; d < n; d *= 2) ++l;
  return l;
}

// A program: ys... = associative_scan(xs...) with `combine` as combine_fn;
// slices have `slice` shape, the xs `xshape`.
struct ScanCase {
  std::vector<DType> dtypes;
  Shape slice;
  std::vector<Node> combine;
  std::vector<std::string> combine_out;
  int64_t dim = 0;
  bool reverse = false;

  Program program() const {
    Program p;
    std::vector<std::string> xs, ys;
    std::vector<ProgramInput> in;
    for (size_t k = 0; k < dtypes.size(); ++k) {
      xs.push_back("x" + std::to_string(k));
      ys.push_back("y" + std::to_string(k));
    }
    for (size_t k = 0; k < dtypes.size(); ++k) in.push_back({"l" + std::to_string(k), meta(dtypes[k], slice)});
    for (size_t k = 0; k < dtypes.size(); ++k) in.push_back({"r" + std::to_string(k), meta(dtypes[k], slice)});
    Node n = node("a", "associative_scan", {refs(xs)}, ys, {{"dim", lit(Attr(dim))}, {"reverse", lit(Attr(reverse))}});
    n.subprograms["combine_fn"] = sub(in, combine, combine_out);
    p.nodes.push_back(n);
    p.outputs = ys;
    return p;
  }
};

struct Ran {
  std::vector<Tensor> ys;
  int64_t calls = 0, parallel = 0, sequential = 0;
  size_t variants = 0;
};

Ran run_case(Fixture& f, const ScanCase& c, const std::vector<Tensor>& xs, int times = 1) {
  Program p = c.program();
  std::map<std::string, TensorMeta> im;
  std::map<std::string, Tensor> in;
  for (size_t k = 0; k < xs.size(); ++k) {
    im["x" + std::to_string(k)] = xs[k].meta();
    in["x" + std::to_string(k)] = xs[k];
  }
  CompiledProgram cp = compile_program(p, im, nullptr);
  Ran r;
  for (int t = 0; t < times; ++t) {
    auto er = execute_program(cp, in, f.opts());
    r.ys.clear();
    for (auto& [name, y] : er.outputs) r.ys.push_back(y);
  }
  const ScanBatching& sc = *cp.nodes.at(0).control->batching;
  r.calls = sc.combine_calls.load();
  r.parallel = sc.parallel_runs.load();
  r.sequential = sc.sequential_runs.load();
  r.variants = sc.levels.size();
  return r;
}

ScanCase binary_case(const std::string& op, DType dt, Shape slice) {
  ScanCase c;
  c.dtypes = {dt};
  c.slice = std::move(slice);
  c.combine = {node("c", op, {ref("l0"), ref("r0")}, {"o"})};
  c.combine_out = {"o"};
  return c;
}

TEST(AssociativeScan, ParallelCumsumMatchesNumpyStyleReference) {
  Fixture f;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t n : {1, 2, 3, 17, 1000}) {
    std::vector<float> x(static_cast<size_t>(n * 3));
    for (auto& v : x) v = u(rng);
    Ran r = run_case(f, binary_case("add", DType::kFloat32, {3}), {make(DType::kFloat32, {n, 3}, x)});
    std::vector<double> acc(3, 0.0);
    auto y = values<float>(r.ys.at(0));
    ASSERT_EQ(y.size(), x.size());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < 3; ++j) {
        acc[static_cast<size_t>(j)] += x[static_cast<size_t>(i * 3 + j)];
        EXPECT_NEAR(y[static_cast<size_t>(i * 3 + j)], acc[static_cast<size_t>(j)], 1e-4) << "n=" << n << " i=" << i;
      }
    }
    // One batched combine_fn call per level: ceil(log2 n), not n - 1.
    EXPECT_EQ(r.calls, levels_for(n)) << "n=" << n;
    EXPECT_EQ(r.parallel, n >= 2 ? 1 : 0);
    EXPECT_EQ(r.sequential, n >= 2 ? 0 : 1);
  }
}

TEST(AssociativeScan, CumprodIsExactOnIntegersAndCummaxAlongDim1Reversed) {
  Fixture f;
  std::vector<int64_t> x = {1, 2, 3, 1, 2, 1, 2, 3, 1, 2, 2, 1, 3, 1, 2, 2, 1};  // n = 17
  Ran r = run_case(f, binary_case("mul", DType::kInt64, {}), {make(DType::kInt64, {17}, x)});
  int64_t acc = 1;
  auto y = values<int64_t>(r.ys.at(0));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], acc *= x[i]) << i;
  EXPECT_EQ(r.calls, 5);

  // (2, 6, 3) scanned along dim 1 from the end: y[:, i] = max(x[:, i:]).
  std::vector<float> z(36);
  std::mt19937 rng(7);
  for (auto& v : z) v = static_cast<float>(rng() % 100);
  ScanCase c = binary_case("maximum", DType::kFloat32, {2, 3});
  c.dim = 1;
  c.reverse = true;
  Ran m = run_case(f, c, {make(DType::kFloat32, {2, 6, 3}, z)});
  auto ym = values<float>(m.ys.at(0));
  for (int a = 0; a < 2; ++a) {
    for (int k = 0; k < 3; ++k) {
      float best = -1;
      for (int i = 5; i >= 0; --i) {
        best = std::max(best, z[static_cast<size_t>(a * 18 + i * 3 + k)]);
        EXPECT_EQ(ym[static_cast<size_t>(a * 18 + i * 3 + k)], best);
      }
    }
  }
  EXPECT_EQ(m.parallel, 1);
  EXPECT_EQ(m.calls, 3);
}

// (a1, b1) then (a2, b2): x -> a2 * (a1 * x + b1) + b2 = (a1 a2, a2 b1 + b2).
ScanCase affine_case(DType dt) {
  ScanCase c;
  c.dtypes = {dt, dt};
  c.slice = {};
  c.combine = {node("aa", "mul", {ref("l0"), ref("r0")}, {"a"}), node("ab", "mul", {ref("r0"), ref("l1")}, {"t"}),
               node("bb", "add", {ref("t"), ref("r1")}, {"b"})};
  c.combine_out = {"a", "b"};
  return c;
}

TEST(AssociativeScan, NonCommutativeAffineCompositionKeepsOperandOrder) {
  Fixture f;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> ua(0.5, 1.5), ub(-1, 1);
  for (int64_t n : {2, 3, 17, 1000}) {
    for (bool reverse : {false, true}) {
      std::vector<double> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
      for (auto& v : a) v = ua(rng);
      for (auto& v : b) v = ub(rng);
      ScanCase c = affine_case(DType::kFloat64);
      c.reverse = reverse;
      std::vector<Tensor> xs = {make(DType::kFloat64, {n}, a), make(DType::kFloat64, {n}, b)};
      Ran par = run_case(f, c, xs);
      Ran seq;
      {
        ParallelSwitch off(false);
        seq = run_case(f, c, xs);
      }
      EXPECT_EQ(par.parallel, 1);
      EXPECT_EQ(seq.sequential, 1);
      EXPECT_EQ(seq.calls, n - 1);
      // Hand reference, in sequence order.
      double ra = 0, rb = 0;
      auto pa = values<double>(par.ys[0]), pb = values<double>(par.ys[1]);
      auto sa = values<double>(seq.ys[0]), sb = values<double>(seq.ys[1]);
      for (int64_t s = 0; s < n; ++s) {
        const size_t i = static_cast<size_t>(reverse ? n - 1 - s : s);
        if (s == 0) {
          ra = a[i];
          rb = b[i];
        } else {
          rb = a[i] * rb + b[i];
          ra = ra * a[i];
        }
        EXPECT_NEAR(pa[i], ra, 1e-9 * std::max(1.0, std::abs(ra))) << n << " " << i;
        EXPECT_NEAR(pb[i], rb, 1e-9 * std::max(1.0, std::abs(rb))) << n << " " << i;
        EXPECT_NEAR(sa[i], ra, 1e-9 * std::max(1.0, std::abs(ra)));
        EXPECT_NEAR(sb[i], rb, 1e-9 * std::max(1.0, std::abs(rb)));
      }
    }
  }
}

TEST(AssociativeScan, MatrixProductsWrittenElementwiseAreExact) {
  // 2x2 integer matrices as 4 inputs: P_i = P_{i-1} @ M_i (not commutative).
  Fixture f;
  ScanCase c;
  c.dtypes = {DType::kInt64, DType::kInt64, DType::kInt64, DType::kInt64};
  c.slice = {2};
  auto dot = [](const std::string& id, const std::string& a, const std::string& b, const std::string& cc,
                const std::string& d) {
    return std::vector<Node>{node(id + "1", "mul", {ref(a), ref(b)}, {id + "p"}),
                             node(id + "2", "mul", {ref(cc), ref(d)}, {id + "q"}),
                             node(id + "3", "add", {ref(id + "p"), ref(id + "q")}, {id})};
  };
  // [l0 l1; l2 l3] @ [r0 r1; r2 r3]
  for (auto v : {dot("o0", "l0", "r0", "l1", "r2"), dot("o1", "l0", "r1", "l1", "r3"),
                 dot("o2", "l2", "r0", "l3", "r2"), dot("o3", "l2", "r1", "l3", "r3")}) {
    c.combine.insert(c.combine.end(), v.begin(), v.end());
  }
  c.combine_out = {"o0", "o1", "o2", "o3"};
  const int64_t n = 17;
  std::mt19937 rng(5);
  std::vector<std::vector<int64_t>> m(4, std::vector<int64_t>(static_cast<size_t>(n * 2)));
  for (auto& e : m) {
    for (auto& v : e) v = static_cast<int64_t>(rng() % 3) - 1;
  }
  std::vector<Tensor> xs;
  for (auto& e : m) xs.push_back(make(DType::kInt64, {n, 2}, e));
  Ran r = run_case(f, c, xs);
  EXPECT_EQ(r.parallel, 1);
  EXPECT_EQ(r.calls, 5);
  for (size_t col = 0; col < 2; ++col) {
    int64_t p[4] = {1, 0, 0, 1};
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      const size_t at = i * 2 + col;
      const int64_t q[4] = {m[0][at], m[1][at], m[2][at], m[3][at]};
      const int64_t np[4] = {p[0] * q[0] + p[1] * q[2], p[0] * q[1] + p[1] * q[3], p[2] * q[0] + p[3] * q[2],
                             p[2] * q[1] + p[3] * q[3]};
      std::copy(np, np + 4, p);
      for (size_t k = 0; k < 4; ++k) EXPECT_EQ(values<int64_t>(r.ys[k])[at], p[k]) << i << " " << k;
    }
  }
}

TEST(AssociativeScan, MixedDtypeInputsAndIdentityOutputs) {
  Fixture f;
  // (sum, count) with a float and an int carry.
  ScanCase c;
  c.dtypes = {DType::kFloat32, DType::kInt32};
  c.slice = {};
  c.combine = {node("s", "add", {ref("l0"), ref("r0")}, {"s0"}), node("k", "add", {ref("l1"), ref("r1")}, {"k0"})};
  c.combine_out = {"s0", "k0"};
  std::vector<float> x = {1, 2, 3, 4, 5};
  std::vector<int32_t> one(5, 1);
  Ran r = run_case(f, c, {make(DType::kFloat32, {5}, x), make(DType::kInt32, {5}, one)});
  EXPECT_EQ(values<float>(r.ys[0]), std::vector<float>({1, 3, 6, 10, 15}));
  EXPECT_EQ(values<int32_t>(r.ys[1]), std::vector<int32_t>({1, 2, 3, 4, 5}));
  EXPECT_EQ(r.parallel, 1);

  // combine(l, r) = r (an output that is an input: the last element) and = l
  // (the first): the batched outputs are views of the running rows.
  for (const char* which : {"r0", "l0"}) {
    ScanCase id;
    id.dtypes = {DType::kFloat32};
    id.slice = {};
    id.combine_out = {which};
    Ran ri = run_case(f, id, {make(DType::kFloat32, {5}, x)});
    EXPECT_EQ(ri.parallel, 1);
    EXPECT_EQ(values<float>(ri.ys[0]), std::string(which) == "r0" ? x : std::vector<float>(5, 1.0f));
  }
}

TEST(AssociativeScan, CombinesThatDoNotBatchFallBackToSequential) {
  Fixture f;
  const int64_t n = 9;
  std::vector<float> x(static_cast<size_t>(n * 3));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 5) - 1.5f;
  // (1, 3) slices; o = l + sum(r, dim=0, keepdim) is l + r per slice, but
  // batched the sum would run over the batch dim with the same output shape.
  ScanCase c;
  c.dtypes = {DType::kFloat32};
  c.slice = {1, 3};
  c.combine = {node("s", "sum", {ref("r0")}, {"t"}, {{"dim", lit(Attr(int64_t{0}))}, {"keepdim", lit(Attr(true))}}),
               node("o", "add", {ref("l0"), ref("t")}, {"o"})};
  c.combine_out = {"o"};
  Ran r = run_case(f, c, {make(DType::kFloat32, {n, 1, 3}, x)});
  EXPECT_EQ(r.parallel, 0);
  EXPECT_EQ(r.sequential, 1);
  EXPECT_EQ(r.calls, n - 1);
  std::vector<float> acc(3, 0);
  auto y = values<float>(r.ys[0]);
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    for (size_t j = 0; j < 3; ++j) EXPECT_FLOAT_EQ(y[i * 3 + j], acc[j] += x[i * 3 + j]);
  }

  // A matmul of 2x2 slices (associative, not elementwise): sequential.
  ScanCase mm = binary_case("matmul", DType::kFloat32, {2, 2});
  std::vector<float> mx = {1, 1, 0, 1, 2, 0, 0, 1, 1, 0, 3, 1};  // 3 matrices
  Ran rm = run_case(f, mm, {make(DType::kFloat32, {3, 2, 2}, mx)});
  EXPECT_EQ(rm.sequential, 1);
  EXPECT_EQ(rm.calls, 2);
  // [1 1; 0 1] @ [2 0; 0 1] = [2 1; 0 1]; @ [1 0; 3 1] = [5 1; 3 1]
  EXPECT_EQ(values<float>(rm.ys[0]), std::vector<float>({1, 1, 0, 1, 2, 1, 0, 1, 5, 1, 3, 1}));

  // A combine returning a constant does not batch either (its output would
  // lack the batch dim): ys = [x0, c, c, ...].
  ScanCase k;
  k.dtypes = {DType::kFloat32};
  k.slice = {};
  ArgExpr seven;
  seven.kind = ArgExpr::Kind::kTensor;
  seven.tensor = make(DType::kFloat32, {}, std::vector<float>{7});
  k.combine = {node("z", "mul", {seven, lit(Attr(1.0))}, {"o"})};
  k.combine_out = {"o"};
  Ran rk = run_case(f, k, {make(DType::kFloat32, {4}, std::vector<float>{1, 2, 3, 4})});
  EXPECT_EQ(rk.sequential, 1);
  EXPECT_EQ(values<float>(rk.ys[0]), std::vector<float>({1, 7, 7, 7}));
}

TEST(AssociativeScan, APromotionThatChangesWhenBatchedFallsBack) {
  // 0-d int32 slices + a 0-d int64 constant promote to int64; batched, the
  // slices have a dim and win (int32): the batched types differ, so the
  // combine runs sequentially.
  Fixture f;
  ScanCase c;
  c.dtypes = {DType::kInt32};
  c.slice = {};
  ArgExpr zero;
  zero.kind = ArgExpr::Kind::kTensor;
  zero.tensor = make(DType::kInt64, {}, std::vector<int64_t>{0});
  ArgExpr i32;
  i32.kind = ArgExpr::Kind::kString;
  i32.str = "int32";
  c.combine = {node("t", "add", {ref("r0"), zero}, {"t"}), node("c", "to", {ref("t"), i32}, {"s"}),
               node("o", "add", {ref("l0"), ref("s")}, {"o"})};
  c.combine_out = {"o"};
  Ran r = run_case(f, c, {make(DType::kInt32, {6}, std::vector<int32_t>{1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(r.sequential, 1);
  EXPECT_EQ(r.parallel, 0);
  EXPECT_EQ(values<int32_t>(r.ys[0]), std::vector<int32_t>({1, 3, 6, 10, 15, 21}));
}

TEST(AssociativeScan, BatchedVariantsAreCompiledOnceAndReused) {
  Fixture f;
  std::vector<float> x(100, 1.0f);
  Ran r = run_case(f, binary_case("add", DType::kFloat32, {}), {make(DType::kFloat32, {100}, x)}, 3);
  EXPECT_EQ(r.parallel, 3);
  EXPECT_EQ(r.calls, 3 * 7);
  EXPECT_EQ(r.variants, 7u);  // batch sizes 99, 98, 96, 92, 84, 68, 36
  auto y = values<float>(r.ys[0]);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], static_cast<float>(i + 1));
}

TEST(AssociativeScan, ConcurrentRunsShareOneCache) {
  // Runs of one compiled node on several threads at once (a graph's
  // replays, TSan in CI): the variants are compiled once, results agree.
  Fixture f;
  Program p = binary_case("add", DType::kFloat32, {}).program();
  Tensor x = make(DType::kFloat32, {50}, std::vector<float>(50, 2.0f));
  CompiledProgram cp = compile_program(p, {{"x0", x.meta()}}, nullptr);
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        auto r = execute_program(cp, {{"x0", x}}, f.opts());
        auto y = values<float>(r.outputs.at(0).second);
        for (size_t j = 0; j < y.size(); ++j) bad += y[j] != 2.0f * static_cast<float>(j + 1);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  const ScanBatching& sc = *cp.nodes.at(0).control->batching;
  EXPECT_EQ(sc.parallel_runs.load(), 20);
  EXPECT_EQ(sc.combine_calls.load(), 20 * 6);
  EXPECT_EQ(sc.levels.size(), 6u);
}

TEST(AssociativeScan, CancellationAndDeadlineStopTheParallelPath) {
  Fixture f;
  Program p = binary_case("add", DType::kFloat32, {}).program();
  Tensor x = make(DType::kFloat32, {64}, std::vector<float>(64, 1.0f));
  CompiledProgram cp = compile_program(p, {{"x0", x.meta()}}, nullptr);
  std::atomic<bool> cancelled{true};
  ExecOptions o = f.opts();
  o.ctx.cancelled = &cancelled;
  try {
    execute_program(cp, {{"x0", x}}, o);
    FAIL() << "expected cancelled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCancelled);
    EXPECT_EQ(e.node(), "a");
  }
  ExecOptions d = f.opts();
  d.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  try {
    execute_program(cp, {{"x0", x}}, d);
    FAIL() << "expected deadline_exceeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded);
  }
  EXPECT_EQ(cp.nodes.at(0).control->batching->combine_calls.load(), 0);
}

TEST(AssociativeScan, MalformedCombineStillRejectedAtCompile) {
  // A combine_fn whose declared slice shapes do not match stays 400.
  ScanCase c = binary_case("add", DType::kFloat32, {4});
  Program p = c.program();
  try {
    compile_program(p, {{"x0", meta(DType::kFloat32, {5, 3})}}, nullptr);
    FAIL() << "expected invalid_program";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidProgram);
  }
}

}  // namespace
}  // namespace tensord
