// Conditional IF/WHILE nodes in a captured CUDA graph (label "gpu"): the
// branch and the trip count follow device data on every replay. Memcpy
// nodes do the work so the test needs no kernels of its own. Skips, saying
// why, without a device.
#include "ops/cuda/conditional_node.cuh"

#include <gtest/gtest.h>

#include <vector>

#include "ops/cuda/cuda_backend.h"
#include "ops/error.h"

namespace tensord::cuda {
namespace {

#define CHECK_CUDA(x) ASSERT_EQ((x), cudaSuccess)

class ConditionalNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() <= 0) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports 0)";
    CHECK_CUDA(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    if (s_) cudaStreamDestroy(s_);
  }
  void instantiate() {
    CHECK_CUDA(cudaStreamEndCapture(s_, &graph_));
    CHECK_CUDA(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  cudaStream_t s_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

TEST_F(ConditionalNodeTest, IfNodeTakesTheBranchTheDeviceDataSays) {
  int* d = nullptr;  // [x, then_value, else_value]
  bool* pred = nullptr;
  CHECK_CUDA(cudaMalloc(&d, 3 * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&pred, sizeof(bool)));
  int init[3] = {0, 111, 222};
  CHECK_CUDA(cudaMemcpy(d, init, sizeof(init), cudaMemcpyHostToDevice));

  CHECK_CUDA(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal));
  {
    ConditionalNode n(s_, ConditionalNode::Kind::kIf, pred);
    cudaStream_t b = n.begin_body(0);
    CHECK_CUDA(cudaMemcpyAsync(d, d + 1, sizeof(int), cudaMemcpyDeviceToDevice, b));
    n.end_body();
    b = n.begin_body(1);
    CHECK_CUDA(cudaMemcpyAsync(d, d + 2, sizeof(int), cudaMemcpyDeviceToDevice, b));
    n.end_body();
  }
  instantiate();
  for (bool p : {true, false, true, false}) {
    CHECK_CUDA(cudaMemcpy(pred, &p, sizeof(bool), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaGraphLaunch(exec_, s_));
    CHECK_CUDA(cudaStreamSynchronize(s_));
    int x = 0;
    CHECK_CUDA(cudaMemcpy(&x, d, sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT_EQ(x, p ? 111 : 222);
  }
  cudaFree(d);
  cudaFree(pred);
}

TEST_F(ConditionalNodeTest, WhileNodeRunsUntilTheDevicePredicateIsFalse) {
  // flags = [1,1,1,0,...]: each iteration shifts flags and vals left by one
  // and re-reads flags[0]; three iterations leave vals[0] == 40.
  constexpr int kN = 8;
  bool* flags = nullptr;
  bool* tmpf = nullptr;
  int* vals = nullptr;
  int* tmpv = nullptr;
  CHECK_CUDA(cudaMalloc(&flags, kN));
  CHECK_CUDA(cudaMalloc(&tmpf, kN));
  CHECK_CUDA(cudaMalloc(&vals, kN * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&tmpv, kN * sizeof(int)));
  CHECK_CUDA(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal));
  {
    ConditionalNode n(s_, ConditionalNode::Kind::kWhile, flags);
    cudaStream_t b = n.begin_body(0);
    CHECK_CUDA(cudaMemcpyAsync(tmpf, flags + 1, kN - 1, cudaMemcpyDeviceToDevice, b));
    CHECK_CUDA(cudaMemcpyAsync(flags, tmpf, kN - 1, cudaMemcpyDeviceToDevice, b));
    CHECK_CUDA(cudaMemcpyAsync(tmpv, vals + 1, (kN - 1) * sizeof(int), cudaMemcpyDeviceToDevice, b));
    CHECK_CUDA(cudaMemcpyAsync(vals, tmpv, (kN - 1) * sizeof(int), cudaMemcpyDeviceToDevice, b));
    n.set_condition_from(flags);
    n.end_body();
  }
  instantiate();
  for (int trips : {3, 0, 5}) {
    bool hf[kN] = {};
    int hv[kN];
    for (int i = 0; i < kN; ++i) {
      hf[i] = i < trips;
      hv[i] = 10 * (i + 1);
    }
    CHECK_CUDA(cudaMemcpy(flags, hf, kN, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(vals, hv, sizeof(hv), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaGraphLaunch(exec_, s_));
    CHECK_CUDA(cudaStreamSynchronize(s_));
    int v0 = 0;
    CHECK_CUDA(cudaMemcpy(&v0, vals, sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT_EQ(v0, 10 * (trips + 1)) << trips << " trips";
  }
  cudaFree(flags);
  cudaFree(tmpf);
  cudaFree(vals);
  cudaFree(tmpv);
}

TEST_F(ConditionalNodeTest, RefusesAStreamThatIsNotCapturing) {
  bool* pred = nullptr;
  CHECK_CUDA(cudaMalloc(&pred, sizeof(bool)));
  EXPECT_THROW(ConditionalNode(s_, ConditionalNode::Kind::kIf, pred), Error);
  cudaFree(pred);
}

}  // namespace
}  // namespace tensord::cuda
