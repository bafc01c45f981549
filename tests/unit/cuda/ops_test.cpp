// The CUDA op kernels (ops/cuda/cuda_ops.h) run through the engine beside
// the CPU fallback, against the same programs on the CPU backend. Label
// "gpu": without a device the device tests skip, saying so; the
// registration test runs anywhere the CUDA library is built.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "ops/backend.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/optim_fused.cuh"
#include "ops/error.h"
#include "ops/op_registry.h"
#include "scheduler/engine.h"
#include "tests/unit/graphs/program_builder.h"
#include "tests/unit/scheduler/run_job.h"

namespace tensord {
namespace {
using namespace testing_util;

OpArgs<TensorMeta> metas(const char* op, std::vector<TensorMeta> ts) {
  OpArgs<TensorMeta> a;
  a.op = OpRegistry::global().find(op);
  for (auto& t : ts) a.tensors.push_back({t});
  a.attrs.resize(a.op->params.size());
  a.tensors.resize(a.op->params.size());
  return a;
}

TEST(CudaNoDevice, KernelsAreRegisteredForTheCoreOps) {
  const OpRegistry& r = OpRegistry::global();
  for (const char* op : {"add", "sub", "mul", "div", "exp", "lt", "matmul", "linalg.eigh", "optim.sgd", "optim.adam",
                         "optim.adamw", "optim.adagrad"}) {
    EXPECT_TRUE(r.find(op)->kernels.count("cuda")) << op;
  }
  EXPECT_FALSE(r.find("optim.muon")->kernels.count("cuda")) << "Muon runs on the CPU kernel";
  const auto& add = r.find("add")->accepts.at("cuda");
  TensorMeta f{DType::kFloat32, {4}};
  TensorMeta i{DType::kInt64, {4}};
  TensorMeta number{DType::kFloat64, {}, true};
  EXPECT_TRUE(add(metas("add", {f, f})));
  EXPECT_TRUE(add(metas("add", {f, number})));
  EXPECT_FALSE(add(metas("add", {i, i}))) << "int64 runs on the CPU";
  const auto& mm = r.find("matmul")->accepts.at("cuda");
  EXPECT_TRUE(mm(metas("matmul", {TensorMeta{DType::kFloat32, {2, 3}}, TensorMeta{DType::kFloat32, {3, 4}}})));
  EXPECT_FALSE(mm(metas("matmul", {TensorMeta{DType::kFloat32, {3}}, TensorMeta{DType::kFloat32, {3}}})));
}

class CudaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!make_cuda_backend())
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports " << cuda_device_count() << ")";
  }
  static ServerConfig config() {
    ServerConfig c = default_config(2);
    c.tenants[0].name = "t";
    return c;
  }
  // Runs `s` on a fresh engine over `backend` for a fresh tenant seeded
  // with `stored`, `steps` times; the last result and the tenant's stored
  // tensors (copied to the host).
  static std::pair<JobResult, std::map<std::string, Tensor>> run(const char* backend, const JobSpec& s,
                                                                 const std::map<std::string, Tensor>& stored,
                                                                 int steps = 1) {
    Engine e(make_backend(backend, 1), config());
    Tenant t(config().tenants[0]);
    for (const auto& [n, v] : stored) t.store.put(n, v.clone_host());
    JobResult r;
    for (int i = 0; i < steps; ++i) r = testing_util::run_job(e, t, JobSpec(s));
    // Copies in plain host memory: a host tensor the engine's CPU backend
    // allocated would be freed through that backend, gone with the engine.
    auto detached = [](const Tensor& v) { return v.on_host() ? v.clone_host() : v.to_host(); };
    for (auto& [n, v] : r.outputs) v = detached(v);
    std::map<std::string, Tensor> out;
    for (const auto& [n, v] : t.store.snapshot()) out[n] = detached(v);
    return {std::move(r), std::move(out)};
  }
};

Tensor random_f32(Shape s, std::mt19937& rng) {
  Tensor t = Tensor::empty_host(DType::kFloat32, std::move(s));
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_ptr<float>()[i] = nd(rng);
  return t;
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_TRUE(got.on_host()) << what;
  ASSERT_EQ(got.meta().str(), want.meta().str()) << what;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = 0, w = 0;
    if (got.dtype() == DType::kBool) {
      g = got.data_ptr<bool>()[i];
      w = want.data_ptr<bool>()[i];
    } else {
      g = got.data_ptr<float>()[i];
      w = want.data_ptr<float>()[i];
    }
    ASSERT_NEAR(g, w, tol * (1 + std::abs(w))) << what << " element " << i;
  }
}

TEST_F(CudaOpsTest, ElementwiseWithBroadcastAndNumbersMatchesTheCpu) {
  std::mt19937 rng(7);
  JobSpec s;
  s.program.nodes.push_back(node("a", "add", {ref("x"), ref("b")}, {"y"}, {{"alpha", lit(Attr(0.5))}}));
  s.program.nodes.push_back(node("m", "mul", {ref("y"), lit(Attr(3.0))}, {"z"}));
  s.program.nodes.push_back(node("e", "exp", {ref("z")}, {"ez"}));
  s.program.nodes.push_back(node("d", "div", {ref("ez"), ref("c")}, {"q"}));
  s.program.nodes.push_back(node("l", "lt", {ref("q"), lit(Attr(1.0))}, {"small"}));
  s.program.nodes.push_back(node("r", "relu", {ref("x")}, {"rx"}));
  s.program.nodes.push_back(node("i", "add", {ref("n"), ref("n")}, {"n2"}));  // int64: the CPU
  s.program.outputs = {"q", "small", "rx", "n2"};
  s.inputs["x"] = random_f32({4, 1, 5}, rng);
  s.inputs["b"] = random_f32({3, 5}, rng);
  s.inputs["c"] = random_f32({5}, rng);
  Tensor n = Tensor::empty_host(DType::kInt64, {3});
  for (int k = 0; k < 3; ++k) n.data_ptr<int64_t>()[k] = k - 1;
  s.inputs["n"] = n;
  auto [gpu, gs] = run("cuda", s, {});
  auto [cpu, cs] = run("cpu", s, {});
  ASSERT_EQ(gpu.outputs.size(), 4u);
  EXPECT_EQ(gpu.backend, "cuda");
  for (size_t k = 0; k < 3; ++k) expect_close(gpu.outputs[k].second, cpu.outputs[k].second, 1e-6, gpu.outputs[k].first);
  EXPECT_EQ(gpu.outputs[3].second.data_ptr<int64_t>()[2], 2);
}

TEST_F(CudaOpsTest, MatmulAndEighMatchTheCpu) {
  std::mt19937 rng(11);
  JobSpec s;
  s.program.nodes.push_back(node("m", "matmul", {ref("a"), ref("b")}, {"c"}));
  s.program.nodes.push_back(node("t", "matmul", {ref("a"), ref("at")}, {"sym"}));
  s.program.nodes.push_back(node("e", "linalg.eigvalsh", {ref("sym")}, {"w"}));
  s.program.outputs = {"c", "w"};
  Tensor a = random_f32({6, 4}, rng);
  Tensor at = Tensor::empty_host(DType::kFloat32, {4, 6});
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j) at.data_ptr<float>()[j * 6 + i] = a.data_ptr<float>()[i * 4 + j];
  s.inputs["a"] = a;
  s.inputs["at"] = at;
  s.inputs["b"] = random_f32({4, 3}, rng);
  auto [gpu, gs] = run("cuda", s, {});
  auto [cpu, cs] = run("cpu", s, {});
  expect_close(gpu.outputs[0].second, cpu.outputs[0].second, 1e-5, "matmul");
  expect_close(gpu.outputs[1].second, cpu.outputs[1].second, 1e-4, "eigvalsh");
}

TEST_F(CudaOpsTest, OptimizerStepsRunAsOneLaunchEachAndMatchTheCpu) {
  std::mt19937 rng(3);
  std::map<std::string, Tensor> stored{{"w1", random_f32({1000}, rng)}, {"w2", random_f32({7, 9}, rng)}};
  JobSpec s;
  s.program.nodes.push_back(node("s", "optim.adamw", {refs({"$stored/w1", "$stored/w2"}), refs({"g1", "g2"})}, {},
                                 {{"lr", lit(Attr(0.01))}, {"amsgrad", lit(Attr(true))}, {"state", lit(Attr("opt"))}}));
  s.inputs["g1"] = random_f32({1000}, rng);
  s.inputs["g2"] = random_f32({7, 9}, rng);
  const int64_t launches = cuda::optim_kernel_launches();
  auto [gpu, gs] = run("cuda", s, stored, 3);
  EXPECT_EQ(cuda::optim_kernel_launches() - launches, 3) << "one launch per step for both tensors";
  auto [cpu, cs] = run("cpu", s, stored, 3);
  ASSERT_EQ(gs.size(), cs.size());
  for (const auto& [name, t] : cs) {
    ASSERT_TRUE(gs.count(name)) << name;
    expect_close(gs.at(name), t, 2e-6, name);
  }
}

}  // namespace
}  // namespace tensord
