// Captured graphs on CUDA (graphs/device_graph.h): a whole program stream-
// captured once, cond as an IF node and while_loop as a WHILE node set on
// the device, replayed with new inputs against execute_program on the CPU.
// Label "gpu": without a device every test skips, saying so.
#include <gtest/gtest.h>

#include <memory>

#include "graphs/executor.h"
#include "graphs/graph_pool.h"
#include "graphs/replay_plan.h"
#include "ops/backend.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/error.h"
#include "ops/memory_account.h"
#include "tests/unit/graphs/device_programs.h"

namespace tensord {
namespace {
using namespace testing_util;

class CudaGraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = make_cuda_backend();
    if (!backend_) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports " << cuda_device_count() << ")";
    cpu_ = make_backend("cpu", 1);
    stream_ = backend_->create_stream(dev_);
  }
  void TearDown() override {
    if (backend_) backend_->destroy_stream(stream_);
  }
  // A plan for `p` on the device, over host input buffers as graph_store makes them.
  std::unique_ptr<ReplayPlan> plan(const Program& p, const std::map<std::string, TensorMeta>& in) {
    cp_ = std::make_shared<const CompiledProgram>(compile_program(p, in, nullptr));
    std::map<std::string, Tensor> bufs;
    for (const auto& [name, m] : in) bufs.emplace(name, Tensor::empty_host(m.dtype, m.shape));
    return std::make_unique<ReplayPlan>(cp_, bufs, pool_, backend_.get(), dev_);
  }
  ExecResult on_device(ReplayPlan& pl, const std::map<std::string, Tensor>& in) {
    ExecOptions o;
    o.ctx.backend = backend_.get();
    o.ctx.device = dev_;
    o.ctx.account = acct_;
    o.ctx.stream = stream_;
    return pl.run(in, o);
  }
  ExecResult on_cpu(const std::map<std::string, Tensor>& in) {
    ExecOptions o;
    o.ctx.backend = cpu_.get();
    o.ctx.account = acct_;
    return execute_program(*cp_, in, o);
  }
  static void expect_same(const ExecResult& got, const ExecResult& want) {
    ASSERT_EQ(got.outputs.size(), want.outputs.size());
    for (size_t k = 0; k < got.outputs.size(); ++k) {
      const Tensor g = got.outputs[k].second.to_host();
      const Tensor& w = want.outputs[k].second;
      ASSERT_EQ(g.meta().str(), w.meta().str());
      for (int64_t i = 0; i < g.numel(); ++i) {
        EXPECT_FLOAT_EQ(g.data_ptr<float>()[i], w.data_ptr<float>()[i]) << got.outputs[k].first << "[" << i << "]";
      }
    }
  }

  const Device dev_{DeviceType::kCUDA, 0};
  std::unique_ptr<Backend> backend_, cpu_;
  Stream stream_{};
  std::shared_ptr<MemoryAccount> acct_ = std::make_shared<MemoryAccount>("t");
  GraphPool pool_{nullptr, Device{DeviceType::kCUDA, 0}, acct_};
  std::shared_ptr<const CompiledProgram> cp_;
};

TEST_F(CudaGraphTest, WhileLoopReplaysTheTripCountTheDataSays) {
  Program p;
  p.nodes.push_back(float_while());
  p.outputs = {"s2", "x2"};
  auto pl = plan(p, {{"s", kOne}, {"x", kVec}, {"limit", kOne}});
  ASSERT_NE(pl->device_graph(), nullptr);
  for (float limit : {3.f, 0.f, 7.f, 1.f}) {
    std::map<std::string, Tensor> in = {
        {"s", f32({}, {0})}, {"x", f32({3}, {1, -2, 0.5f})}, {"limit", f32({}, {limit})}};
    expect_same(on_device(*pl, in), on_cpu(in));
  }
  EXPECT_TRUE(pl->device_graph()->captured());
  EXPECT_GT(pl->device_graph()->nodes(), 0u);
}

TEST_F(CudaGraphTest, CondTakesTheBranchTheDataSaysOnEveryReplay) {
  Program p;
  p.nodes.push_back(float_cond());
  p.outputs = {"y"};
  auto pl = plan(p, {{"p", meta(DType::kBool, {})}, {"x", kVec}});
  ASSERT_NE(pl->device_graph(), nullptr);
  for (bool pred : {true, false, false, true}) {
    Tensor b = Tensor::empty_host(DType::kBool, {});
    *b.data_ptr<bool>() = pred;
    std::map<std::string, Tensor> in = {{"p", b}, {"x", f32({3}, {1, 2, 3})}};
    expect_same(on_device(*pl, in), on_cpu(in));
  }
}

TEST_F(CudaGraphTest, RunawayLoopStopsAtMaxItersWithDeadlineExceeded) {
  Program p;
  p.nodes.push_back(float_while(5));
  p.outputs = {"x2"};
  auto pl = plan(p, {{"s", kOne}, {"x", kVec}, {"limit", kOne}});
  std::map<std::string, Tensor> in = {{"s", f32({}, {0})}, {"x", f32({3}, {1, 1, 1})}, {"limit", f32({}, {100})}};
  try {
    on_device(*pl, in);
    FAIL() << "expected deadline_exceeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded);
    EXPECT_EQ(e.node(), "w");
  }
  in["limit"] = f32({}, {4});
  expect_same(on_device(*pl, in), on_cpu(in));  // within max_iters: fine on the next replay
}

}  // namespace
}  // namespace tensord
