// The conformance suite (ggml's test-backend-ops, STYLE.md 6): every
// registered op, at every dtype it accepts, on every compiled backend.
//  - ConformanceCpu/<op>: the CPU kernel against the case table's
//    reference (or property), its outputs against shape inference, run
//    twice for determinism and once on a thread pool; the op's dtypes
//    against the table's.
//  - ConformanceCuda/<op> (label gpu): the CUDA kernel against the CPU
//    kernel at the op's tolerance, for every case the kernel accepts;
//    skips, saying why, without a CUDA device.
//  - ConformanceFake/<op>: the same device path over the fake backend and
//    this binary's fake kernels (fake_kernels.cpp), runnable anywhere.
//  - ConformanceCoverage: a registered op without cases fails here.
//  - ConformanceSummary: prints the (op, dtype) cases per backend.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ops/backend.h"
#include "ops/cpu/thread_pool.h"
#include "ops/error.h"
#include "ops/fake/fake_backend.h"
#include "ops/op_registry.h"
#include "tests/unit/conformance/runner.h"

namespace tensord::conformance {
namespace {

constexpr int kMaxFailuresPerOp = 12;

// (op, dtype) cases and calls run in this process, per backend.
struct Tally {
  std::set<std::pair<std::string, DType>> cases;
  int64_t calls = 0;
};
std::map<std::string, Tally>& tally() {
  static std::map<std::string, Tally> t;
  return t;
}

class TallyPrinter : public ::testing::Environment {
 public:
  void TearDown() override {
    if (tally().empty()) return;
    std::string line = "conformance: this run:";
    for (const auto& [backend, t] : tally()) {
      line += " " + backend + " " + std::to_string(t.cases.size()) + " (op, dtype) cases (" + std::to_string(t.calls) +
              " calls);";
    }
    std::printf("%s\n", line.c_str());
  }
};
[[maybe_unused]] ::testing::Environment* const kTallyPrinter = ::testing::AddGlobalTestEnvironment(new TallyPrinter);

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

std::vector<std::string> registered_ops() {
  std::vector<std::string> out;
  for (const OpDef* op : OpRegistry::global().all()) out.push_back(op->name);
  return out;
}

std::vector<std::string> ops_with_kernel(const std::string& backend) {
  std::vector<std::string> out;
  for (const OpDef* op : OpRegistry::global().all()) {
    if (op->kernels.count(backend)) out.push_back(op->name);
  }
  return out;
}

const CoveredElsewhere* covered(const std::string& op) {
  for (const auto& c : covered_elsewhere()) {
    if (c.op == op) return &c;
  }
  return nullptr;
}

std::string where(const OpDef& op, const Planned& p) {
  return op.name + " / " + p.variant->name + " / " + std::string(dtype_name(p.dtype));
}

// The op's cases, or a failure (skip when it is covered elsewhere).
const OpCases* cases_or_fail(const OpDef& op) {
  const OpCases* c = case_table().find(op.name);
  if (!c && !covered(op.name)) {
    ADD_FAILURE() << "op '" << op.name << "' has no conformance cases: add them to tests/unit/conformance/cases_*.cpp "
                  << "(docs/conformance.md), or list it in covered_elsewhere() with the test that covers it";
  }
  return c;
}

// ---------------------------------------------------------------- CPU

class ConformanceCpu : public ::testing::TestWithParam<std::string> {};

TEST_P(ConformanceCpu, MatchesReferenceAndShapeInference) {
  const OpDef& op = *OpRegistry::global().find(GetParam());
  if (const CoveredElsewhere* c = covered(op.name); c && !case_table().find(op.name)) {
    GTEST_SKIP() << op.name << " is covered by " << c->test_file << " (" << c->why << ")";
  }
  const OpCases* cases = cases_or_fail(op);
  if (!cases) return;
  const std::string dtypes = check_accepted_dtypes(op, *cases);
  EXPECT_TRUE(dtypes.empty()) << "the case table's dtypes and shape inference disagree: " << dtypes;

  std::vector<std::string> rejected;
  const std::vector<Planned> planned = plan(op, *cases, &rejected);
  for (const Variant& v : cases->variants) {
    bool used = false;
    for (const Planned& p : planned) used |= p.variant == &v;
    if (used) continue;
    std::string why;
    for (const auto& r : rejected) {
      if (r.rfind(op.name + "/" + v.name + "/", 0) == 0) why += "\n  " + r;
    }
    ADD_FAILURE() << op.name << ": variant '" << v.name << "' applies to no dtype:" << why;
  }

  auto cpu = make_backend("cpu", 1);
  ThreadPool pool(2);
  int failures = 0;
  std::set<DType> ran;
  auto fail = [&](const std::string& what, const std::string& msg) {
    if (msg.empty()) return;
    ADD_FAILURE() << what << ": " << msg;
    ++failures;
  };
  for (const Planned& p : planned) {
    if (failures >= kMaxFailuresPerOp) {
      ADD_FAILURE() << op.name << ": further cases not run after " << failures << " failures";
      break;
    }
    const std::string at = where(op, p);
    const Call before = deep_copy(p.call);
    Outcome a, b, pooled;
    try {
      a = run_cpu(op, p.call, *cpu, nullptr);
      b = run_cpu(op, p.call, *cpu, nullptr);
      pooled = run_cpu(op, p.call, *cpu, &pool);
    } catch (const Error& e) {
      fail(at, std::string("the kernel threw after shape inference accepted the call: ") + e.message());
      continue;
    }
    fail(at, check_metas(a.outs, p.metas));
    fail(at + " (run twice)", bitwise_equal(a, b));
    fail(at + " (on a thread pool)", compare(pooled, a, cases->tol));
    fail(at + " (operands written)", operands_unchanged(before, p.call));
    const RefFn& r = p.variant->ref ? p.variant->ref : cases->ref;
    if (r) fail(at + " (against the reference)", compare(a, r(before, p.metas), cases->tol));
    if (cases->check) fail(at + " (property)", cases->check(before, a));
    ran.insert(p.dtype);
    tally()["cpu"].cases.insert({op.name, p.dtype});
    ++tally()["cpu"].calls;
  }
  bool referenced = cases->ref || cases->check;
  for (const Variant& v : cases->variants) referenced = referenced || v.ref;
  std::printf("conformance: cpu %s: %zu dtypes, %zu calls%s\n", op.name.c_str(), ran.size(), planned.size(),
              referenced ? "" : " (no reference: determinism, metas and the other backends only)");
}

INSTANTIATE_TEST_SUITE_P(Ops, ConformanceCpu, ::testing::ValuesIn(registered_ops()), param_name);

// ------------------------------------------------------------ devices

// `backend`'s kernel against the CPU kernel on every case it accepts.
void device_conformance(Backend& backend, const std::string& op_name) {
  const std::string name(backend.name());
  const OpDef& op = *OpRegistry::global().find(op_name);
  const OpCases* cases = cases_or_fail(op);
  if (!cases) return;
  auto cpu = make_backend("cpu", 1);
  int failures = 0, accepted = 0;
  std::set<DType> ran;
  for (const Planned& p : plan(op, *cases)) {
    if (!backend_accepts(op, name, p)) continue;  // runs on the CPU kernel in a job
    ++accepted;
    if (failures >= kMaxFailuresPerOp) {
      ADD_FAILURE() << op.name << ": further cases not run after " << failures << " failures";
      break;
    }
    const std::string at = where(op, p) + " on " + name;
    Outcome want, got;
    try {
      want = run_cpu(op, p.call, *cpu, nullptr);
      got = run_device(op, p.call, backend);
    } catch (const Error& e) {
      ADD_FAILURE() << at << ": threw " << e.message();
      ++failures;
      continue;
    }
    std::string msg = check_metas(got.outs, p.metas);
    if (msg.empty()) msg = compare(got, want, cases->tol, cases->compared_outputs);
    if (msg.empty() && cases->check) msg = cases->check(p.call, got);
    if (!msg.empty()) {
      ADD_FAILURE() << at << " (against the CPU kernel): " << msg;
      ++failures;
    }
    ran.insert(p.dtype);
    tally()[name].cases.insert({op.name, p.dtype});
    ++tally()[name].calls;
  }
  EXPECT_GT(accepted, 0) << op.name << " has a " << name << " kernel but no conformance case it accepts";
  std::printf("conformance: %s %s: %zu dtypes, %d calls\n", name.c_str(), op.name.c_str(), ran.size(), accepted);
}

bool compiled(const std::string& backend) {
  for (const auto& b : compiled_backends()) {
    if (b == backend) return true;
  }
  return false;
}

// Why CUDA cases cannot run here, or "".
std::string cuda_unavailable() {
  if (!compiled("cuda")) return "the CUDA backend is not compiled into this build (no nvcc)";
  if (!make_backend("cuda")) return "no CUDA device";
  return "";
}

class ConformanceCuda : public ::testing::TestWithParam<std::string> {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ConformanceCuda);

TEST_P(ConformanceCuda, MatchesTheCpuKernel) {
  if (std::string why = cuda_unavailable(); !why.empty()) GTEST_SKIP() << why;
  auto cuda = make_backend("cuda");
  device_conformance(*cuda, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Ops, ConformanceCuda, ::testing::ValuesIn(ops_with_kernel("cuda")), param_name);

TEST(ConformanceCudaDevice, IsPresent) {
  if (std::string why = cuda_unavailable(); !why.empty()) GTEST_SKIP() << why;
}

class ConformanceFake : public ::testing::TestWithParam<std::string> {};

TEST_P(ConformanceFake, MatchesTheCpuKernel) {
  FakeBackend fake;
  device_conformance(fake, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Ops, ConformanceFake, ::testing::ValuesIn(ops_with_kernel("fake")), param_name);

// ----------------------------------------------------------- coverage

TEST(ConformanceCoverage, EveryRegisteredOpHasCases) {
  std::string missing;
  for (const OpDef* op : OpRegistry::global().all()) {
    const bool has = case_table().find(op->name) != nullptr;
    if (!has && !covered(op->name)) missing += " " + op->name;
    EXPECT_FALSE(has && covered(op->name)) << op->name << " has cases and is listed as covered elsewhere";
  }
  EXPECT_TRUE(missing.empty()) << "registered ops without conformance cases (add them to "
                               << "tests/unit/conformance/cases_*.cpp, see docs/conformance.md):" << missing;
}

TEST(ConformanceCoverage, CasesNameRegisteredOps) {
  for (const OpCases& c : case_table().all()) {
    EXPECT_NE(OpRegistry::global().find(c.op), nullptr) << "cases for '" << c.op << "', which is not registered";
    EXPECT_FALSE(c.variants.empty()) << c.op << " has no variants";
    EXPECT_FALSE(c.dtypes.empty()) << c.op << " lists no dtypes";
    EXPECT_TRUE(c.variants.empty() || c.variants.front().only.empty())
        << c.op << ": the first variant (the dtype check's) must apply to every dtype";
  }
}

// "Every dtype it accepts" is the op's published list (OpDef::dtypes, what
// GET /v1/ops gives; tests/unit/ops/op_dtypes_test checks it against shape
// inference): the cases run exactly those dtypes.
TEST(ConformanceCoverage, CasesRunTheOpsPublishedDtypes) {
  for (const OpCases& c : case_table().all()) {
    const OpDef* op = OpRegistry::global().find(c.op);
    if (!op) continue;  // CasesNameRegisteredOps says so
    EXPECT_EQ(c.dtypes, DTypes(op->dtypes.begin(), op->dtypes.end())) << c.op;
  }
}

TEST(ConformanceCoverage, CoveredElsewhereTestsNameTheirOps) {
  for (const CoveredElsewhere& c : covered_elsewhere()) {
    std::ifstream in(std::string(TENSORD_SOURCE_DIR) + "/" + c.test_file);
    ASSERT_TRUE(in.good()) << c.op << ": " << c.test_file << " does not exist";
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("\"" + c.op + "\""), std::string::npos)
        << c.test_file << " never names \"" << c.op << "\", which it is said to cover";
  }
}

TEST(ConformanceCoverage, EveryDeviceKernelHasACaseItAccepts) {
  for (const OpDef* op : OpRegistry::global().all()) {
    const OpCases* cases = case_table().find(op->name);
    if (!cases) continue;  // EveryRegisteredOpHasCases says so
    const std::vector<Planned> planned = plan(*op, *cases);
    for (const auto& [backend, kernel] : op->kernels) {
      if (backend == "cpu") continue;
      int n = 0;
      for (const Planned& p : planned) n += backend_accepts(*op, backend, p) ? 1 : 0;
      EXPECT_GT(n, 0) << op->name << " has a " << backend << " kernel but no conformance case it accepts";
    }
  }
}

// ------------------------------------------------------------ summary

TEST(ConformanceSummary, CasesPerBackend) {
  std::vector<std::string> backends = compiled_backends();
  if (!compiled("cuda")) backends.emplace_back("cuda");
  backends.emplace_back("fake");
  std::map<std::string, std::set<std::pair<std::string, DType>>> cases;
  std::map<std::string, int64_t> calls;
  for (const OpDef* op : OpRegistry::global().all()) {
    const OpCases* c = case_table().find(op->name);
    if (!c) continue;
    for (const Planned& p : plan(*op, *c)) {
      for (const auto& b : backends) {
        if (!op->kernels.count(b) || !backend_accepts(*op, b, p)) continue;
        cases[b].insert({op->name, p.dtype});
        ++calls[b];
      }
    }
  }
  std::string line = "conformance:";
  for (const auto& b : backends) {
    const std::string n =
        std::to_string(cases[b].size()) + " (op, dtype) cases (" + std::to_string(calls[b]) + " calls)";
    if (b == "cuda" && !cuda_unavailable().empty()) {
      line += " cuda 0 of " + n + " (skipped: " + cuda_unavailable() + ")";
    } else if (b == "cuda") {
      line += " cuda " + n + " (run under the gpu label)";
    } else {
      line += " " + b + " " + n + (b == "fake" ? " (test double)" : "");
    }
    line += b == backends.back() ? "" : ";";
  }
  std::printf("%s\n", line.c_str());
  RecordProperty("summary", line);
  EXPECT_GT(cases["cpu"].size(), 0u);
}

// ------------------------------------------------------------ harness

TEST(ConformanceHarness, CompareHoldsTheTolerance) {
  const Tensor one = tensor_of(DType::kFloat32, {3}, {1, 2, std::numeric_limits<double>::quiet_NaN()});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tolerance two{2, 2};
  EXPECT_EQ(compare(one, one, Tolerance{0, 0}), "");
  EXPECT_EQ(compare(tensor_of(DType::kFloat32, {3}, {1, 2 + 2e-7, nan}), one, two), "");
  EXPECT_NE(compare(tensor_of(DType::kFloat32, {3}, {1, 2.001, nan}), one, two), "");
  EXPECT_NE(compare(tensor_of(DType::kFloat32, {3}, {1, 2, 0}), one, two), "") << "NaN matches only NaN";
  EXPECT_NE(compare(tensor_of(DType::kInt64, {1}, {5}), tensor_of(DType::kInt64, {1}, {6}), Tolerance{1e9, 1e9}), "");
  EXPECT_NE(compare(tensor_of(DType::kFloat64, {3}, {1, 2, 3}), one, two), "") << "dtypes differ";
  // Narrow floats: relative to the value (one rounding), not to 1.
  const Tensor small = tensor_of(DType::kFloat16, {1}, {0.01});
  EXPECT_EQ(compare(tensor_of(DType::kFloat16, {1}, {0.01 * (1 + 1.0 / 1024)}), small, two), "");
  EXPECT_NE(compare(tensor_of(DType::kFloat16, {1}, {0.0125}), small, Tolerance{64, 2}), "");
  const Tensor e8 = tensor_of(DType::kFloat8E8M0FNU, {1}, {4});
  EXPECT_EQ(compare(tensor_of(DType::kFloat8E8M0FNU, {1}, {8}), e8, two), "");
  EXPECT_NE(compare(tensor_of(DType::kFloat8E8M0FNU, {1}, {1}), e8, Tolerance{64, 64}), "");
}

// A device kernel that is off by a little is caught on the device path.
TEST(ConformanceHarness, AWrongDeviceKernelFails) {
  OpDef op;
  op.name = "test.scale";
  op.params = {ParamSpec{"input", ParamKind::kTensor, Attr(), false, false}};
  op.outputs = {"out"};
  auto scale = [](float k) {
    return [k](const OpContext& ctx, const OpArgs<Tensor>& a) {
      const Tensor& x = a.tensor(0);
      Tensor out = ctx.empty(x.dtype(), x.shape());
      for (int64_t i = 0; i < x.numel(); ++i) out.data_ptr<float>()[i] = x.data_ptr<float>()[i] * k;
      return std::vector<Tensor>{out};
    };
  };
  op.kernels["cpu"] = scale(2.f);
  op.kernels["fake"] = scale(2.001f);
  Rng rng(1);
  Call c = Call().arg("input", random_tensor(DType::kFloat32, {8}, rng, {1, 2}));
  FakeBackend fake;
  auto cpu = make_backend("cpu", 1);
  EXPECT_NE(compare(run_device(op, c, fake), run_cpu(op, c, *cpu, nullptr), Tolerance{4, 4}), "");
  op.kernels["fake"] = scale(2.f);
  EXPECT_EQ(compare(run_device(op, c, fake), run_cpu(op, c, *cpu, nullptr), Tolerance{4, 4}), "");
}

}  // namespace
}  // namespace tensord::conformance
