// Green contexts per partition (label "gpu"). The SM plan is pure and runs
// everywhere; the device tests skip, saying why, where no device answers.
#include "ops/cuda/green_context.h"

#include <gtest/gtest.h>

#include "ops/cuda/cuda_backend.h"
#include "ops/error.h"

namespace tensord::cuda {
namespace {

TEST(GreenContextPlan, SharesRoundDownToAlignmentWithAMinimum) {
  // H100 SXM: 132 SMs, splits in multiples of 8 (min 8) with co-scheduling.
  EXPECT_EQ(plan_sm_counts(132, 8, 8, {0.25, 0.75}), (std::vector<int>{32, 96}));
  EXPECT_EQ(plan_sm_counts(132, 8, 8, {0.5, 0.5}), (std::vector<int>{64, 64}));
  EXPECT_EQ(plan_sm_counts(132, 8, 8, {0.01, 0.5}), (std::vector<int>{8, 64}));  // minimum
  EXPECT_EQ(plan_sm_counts(132, 2, 2, {1.0}), (std::vector<int>{132}));
}

TEST(GreenContextPlan, TooManyPartitionsIsAnError) {
  try {
    plan_sm_counts(16, 8, 8, {0.3, 0.3, 0.3});
    FAIL() << "three 8-SM partitions fit in 16 SMs?";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("need 24 SMs"), std::string::npos) << e.message();
  }
  EXPECT_THROW(plan_sm_counts(0, 8, 8, {0.5}), Error);
}

TEST(GreenContextNoDevice, AnswersWithoutDriver) {
  // Must not crash on a machine without a driver; unsupported is an Error.
  if (green_contexts_supported()) GTEST_SKIP() << "a device with green contexts is present";
  try {
    GreenContexts g(0, {{"a", 0.5, 2}});
    FAIL() << "green contexts created without support";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  }
}

class GreenContextDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports 0)";
    if (!green_contexts_supported()) GTEST_SKIP() << "the driver has no green contexts (CUDA < 12.5)";
  }
};

TEST_F(GreenContextDevice, TwoPartitionsGetTheirShareOfSms) {
  GreenContexts g(0, {{"interactive", 0.25, 4}, {"batch", 0.75, 16}});
  ASSERT_EQ(g.size(), 2u);
  const int total = g.device_sms();
  ASSERT_GT(total, 0);
  const int a = g.partition(0).sm_count, b = g.partition(1).sm_count;
  EXPECT_EQ(g.queried_sm_count(0), a);
  EXPECT_EQ(g.queried_sm_count(1), b);
  EXPECT_GT(a, 0);
  EXPECT_GT(b, a);  // 3x the share
  EXPECT_LE(a + b, total);
  // Within the driver's granularity of the asked share.
  EXPECT_NEAR(a, 0.25 * total, 16);
  EXPECT_NEAR(b, 0.75 * total, 16);
  EXPECT_EQ(g.partition(0).name, "interactive");
  EXPECT_EQ(g.partition(1).workqueue_limit, 16);
#if CUDA_VERSION >= 13010
  EXPECT_TRUE(g.partition(1).workqueue_limit_applied);
#else
  EXPECT_FALSE(g.partition(1).workqueue_limit_applied);
#endif
  // Streams in each partition run work.
  for (size_t i = 0; i < g.size(); ++i) {
    cudaStream_t s = g.create_stream(i);
    ASSERT_NE(s, nullptr);
    void* p = nullptr;
    ASSERT_EQ(cudaMalloc(&p, 1024), cudaSuccess);
    EXPECT_EQ(cudaMemsetAsync(p, 1, 1024, s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    unsigned char host[1024] = {};
    ASSERT_EQ(cudaMemcpy(host, p, 1024, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(host[1023], 1);
    cudaFree(p);
    EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  }
}

TEST_F(GreenContextDevice, OverAskingIsRefused) {
  // More partitions than the SMs can hold at the minimum size each.
  std::vector<PartitionSpec> many(1000, PartitionSpec{"p", 0.001, 1});
  EXPECT_THROW(GreenContexts(0, many), Error);
}

}  // namespace
}  // namespace tensord::cuda
