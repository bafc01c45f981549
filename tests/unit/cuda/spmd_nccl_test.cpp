// SPMD jobs on the CUDA backend (API.md 8: "GPUs on CUDA ... the engine is
// NCCL on CUDA"): the engine's ranks run on GPU r with NCCL groups from the
// server's factory (ops/dist/nccl/nccl_process_group.h), their programs against
// the same requests on the CPU backend's Gloo ranks. Label "gpu": without a
// device, or without NCCL in the build, the tests skip saying why; a test
// that needs two GPUs skips on one, saying so.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ops/backend.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/dist/dist_ops.h"
#include "ops/dist/flight_recorder.h"
#include "ops/error.h"
#include "ops/op_registry.h"
#include "scheduler/engine.h"
#include "scheduler/rank_workers.h"
#include "tests/unit/graphs/program_builder.h"
#include "tests/unit/scheduler/one_tenant_config.h"
#include "tests/unit/scheduler/run_job.h"
#if defined(TENSORD_HAVE_NCCL)
#include "ops/dist/nccl/nccl_process_group.h"
#endif

namespace tensord {
namespace {
using namespace testing_util;

Tensor arange_f32(int64_t n) {
  Tensor t = Tensor::empty_host(DType::kFloat32, {n});
  for (int64_t i = 0; i < n; ++i) t.data_ptr<float>()[i] = static_cast<float>(i) - 3.5f;
  return t;
}

// x sharded over the group; y = 2x (a CUDA kernel on the rank's stream, so
// the collective must wait for it), then every collective the request
// names, their results returned and the all_reduce's stored.
JobSpec collectives(int64_t n, std::vector<int> ranks, int count) {
  dist::link_dist_ops();
  const auto last = static_cast<int64_t>(ranks.empty() ? count - 1 : static_cast<int>(ranks.size()) - 1);
  JobSpec s;
  s.program.nodes = {
      node("m", "mul", {ref("x"), lit(Attr(2.0))}, {"y"}),
      node("r", "dist.all_reduce", {ref("y")}, {"sum"}),
      node("mx", "dist.all_reduce", {ref("y")}, {"max"}, {{"op", lit(Attr(std::string("max")))}}),
      node("g", "dist.all_gather", {ref("y")}, {"gathered"}),
      node("b", "dist.broadcast", {ref("y")}, {"from0"}),
      node("b1", "dist.broadcast", {ref("y")}, {"from_last"}, {{"src", lit(Attr(last))}}),
  };
  s.program.outputs = {"sum", "max", "gathered", "from0", "from_last", "y"};
  s.store = {{"sum", "total"}};
  s.spmd.emplace();
  s.spmd->count = count;
  s.spmd->ranks = std::move(ranks);
  s.spmd->inputs["x"].shard = arange_f32(n);
  return s;
}

std::vector<float> values(const Tensor& t) {
  Tensor h = t.on_host() ? t : t.to_host();
  std::vector<float> v(static_cast<size_t>(h.numel()));
  if (!v.empty()) std::memcpy(v.data(), h.data(), v.size() * sizeof(float));
  return v;
}

void expect_same(const JobResult& got, const JobResult& want) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size());
  for (size_t k = 0; k < want.outputs.size(); ++k) {
    EXPECT_EQ(got.outputs[k].first, want.outputs[k].first);
    EXPECT_EQ(got.outputs[k].second.meta().str(), want.outputs[k].second.meta().str()) << want.outputs[k].first;
    EXPECT_EQ(values(got.outputs[k].second), values(want.outputs[k].second)) << want.outputs[k].first;
    ASSERT_EQ(got.per_rank.at(k).size(), want.per_rank.at(k).size()) << want.outputs[k].first;
    for (size_t i = 0; i < want.per_rank[k].size(); ++i) {
      EXPECT_EQ(values(got.per_rank[k][i]), values(want.per_rank[k][i])) << want.outputs[k].first << " rank " << i;
    }
  }
}

#if defined(TENSORD_HAVE_NCCL)
class SpmdNcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!make_cuda_backend())
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports " << cuda_device_count() << ")";
    gpus_ = cuda_device_count();
  }
  // An engine on `backend` with `ranks` local ranks; on CUDA its groups are
  // NCCL's, as the server makes them.
  static std::unique_ptr<Engine> engine(const char* backend, int ranks) {
    std::unique_ptr<Backend> b = make_backend(backend, 1);
    EngineOptions o;
    o.ranks = ranks;
    o.collective_timeout = std::chrono::milliseconds(20000);
    if (std::string(backend) == "cuda") o.rank_groups = dist::nccl_group_factory(b.get());
    return std::make_unique<Engine>(std::move(b), one_tenant_config(), o);
  }
  int gpus_ = 0;
};

TEST_F(SpmdNcclTest, EveryVisibleGpuIsARankAndMatchesTheCpuRanks) {
  const int R = gpus_;  // one GPU: a group of one rank, still through NCCL
  if (R < 2) std::printf("one visible GPU: the group has one rank (two or more test the transfers)\n");
  auto cuda = engine("cuda", R);
  auto cpu = engine("cpu", R);
  Tenant tc(one_tenant_config().tenants[0]);
  Tenant th(one_tenant_config().tenants[0]);
  const JobResult got = run_job(*cuda, tc, collectives(4 * R, {}, R));
  const JobResult want = run_job(*cpu, th, collectives(4 * R, {}, R));
  EXPECT_EQ(got.backend, "cuda");
  EXPECT_TRUE(got.spmd);
  expect_same(got, want);
  // The all_reduce's result is stored on the tenant's device (GPU 0).
  auto total = tc.store.get("total");
  ASSERT_TRUE(total.has_value());
  EXPECT_EQ(total->device(), (Device{DeviceType::kCUDA, 0}));
  EXPECT_EQ(values(*total), values(*th.store.get("total")));
  // Every rank's collectives went through NCCL, in the flight recorder.
  for (int r = 0; r < R; ++r) {
    const auto dump = cuda->ranks().recorder(r)->dump();
    bool nccl_all_reduce = false;
    for (const auto& e : dump.entries) nccl_all_reduce = nccl_all_reduce || e.profiling_name == "nccl:all_reduce";
    EXPECT_TRUE(nccl_all_reduce) << "rank " << r;
  }
  // A second job runs in the groups the first joined.
  const JobResult again = run_job(*cuda, tc, collectives(4 * R, {}, R));
  expect_same(again, want);
}

TEST_F(SpmdNcclTest, ASubgroupInAnotherOrderRunsOnItsRanksGpus) {
  if (gpus_ < 2) GTEST_SKIP() << "needs two GPUs (one rank per GPU); " << gpus_ << " visible";
  auto cuda = engine("cuda", 2);
  auto cpu = engine("cpu", 2);
  Tenant tc(one_tenant_config().tenants[0]);
  Tenant th(one_tenant_config().tenants[0]);
  // Member 0 is rank 1 (GPU 1): its stored write moves to GPU 0.
  const JobResult got = run_job(*cuda, tc, collectives(6, {1, 0}, 0));
  const JobResult want = run_job(*cpu, th, collectives(6, {1, 0}, 0));
  expect_same(got, want);
  auto total = tc.store.get("total");
  ASSERT_TRUE(total.has_value());
  EXPECT_EQ(total->device(), (Device{DeviceType::kCUDA, 0}));
}

TEST_F(SpmdNcclTest, MoreRanksThanGpusAreRefused) {
  try {
    engine("cuda", gpus_ + 1);
    FAIL() << "an engine with more ranks than GPUs";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("one per rank"), std::string::npos) << e.message();
  }
}

TEST_F(SpmdNcclTest, AnUnevenGatherFailsByNameOnEveryRank) {
  if (gpus_ < 2) GTEST_SKIP() << "needs two GPUs for uneven parts; " << gpus_ << " visible";
  auto cuda = engine("cuda", 2);
  Tenant tc(one_tenant_config().tenants[0]);
  JobSpec s = collectives(7, {}, 2);  // parts of 4 and 3: NCCL gathers equal parts only
  s.store.clear();
  s.program.nodes = {node("g", "dist.all_gather", {ref("x")}, {"gathered"})};
  s.program.outputs = {"gathered"};
  try {
    run_job(*cuda, tc, s);
    FAIL() << "an uneven all_gather on NCCL";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kShapeMismatch) << e.message();
    EXPECT_NE(e.message().find("nccl"), std::string::npos) << e.message();
  }
}
#else
TEST(SpmdNcclTest, NeedsNccl) {
  GTEST_SKIP() << "built without NCCL (libnccl not found at configure time)";
}
#endif

// Wherever the CUDA library is built: the collectives have CUDA kernels.
TEST(SpmdNcclNoDevice, CollectivesHaveCudaKernels) {
  dist::link_dist_ops();
  for (const char* op : {"dist.all_reduce", "dist.all_gather", "dist.reduce_scatter", "dist.broadcast",
                         "dist.all_to_all", "dist.barrier"}) {
    const OpDef* d = OpRegistry::global().find(op);
    ASSERT_NE(d, nullptr) << op;
    EXPECT_TRUE(d->kernels.count("cuda")) << op;
    EXPECT_TRUE(d->kernels.count("cpu")) << op;
  }
}

}  // namespace
}  // namespace tensord
