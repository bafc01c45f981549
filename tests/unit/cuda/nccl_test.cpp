// NcclProcessGroup on real GPUs (label "gpu"): a group of one rank per
// visible GPU (NCCL refuses two ranks on one GPU), every collective against
// the host arithmetic, seqs and the flight recorder's "nccl:" entries, and
// ranks that disagree failing together by name. Without a device, or
// without NCCL in the build, every test skips saying so.
#include <gtest/gtest.h>

#include <future>
#include <numeric>
#include <vector>

#include "ops/cuda/cuda_backend.h"
#include "ops/dist/gloo_process_group.h"
#include "ops/error.h"
#include "ops/tensor.h"
#if defined(TENSORD_HAVE_NCCL)
#include "ops/dist/nccl/nccl_process_group.h"
#endif

namespace tensord::dist {
namespace {

#if defined(TENSORD_HAVE_NCCL)
class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = make_cuda_backend();
    if (!backend_) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports " << cuda_device_count() << ")";
    gpus_ = cuda_device_count();
  }
  // One group of `n` ranks, rank r on GPU r.
  std::vector<std::unique_ptr<NcclProcessGroup>> group(int n, const std::string& name) {
    auto store = make_hash_store();
    std::vector<std::future<std::unique_ptr<NcclProcessGroup>>> fs;
    for (int r = 0; r < n; ++r) {
      fs.push_back(std::async(std::launch::async, [&, r] {
        ProcessGroupOptions po;
        po.name = name;
        po.timeout = std::chrono::milliseconds(10000);
        po.recorder = std::make_shared<FlightRecorder>(r);
        NcclOptions no;
        no.store = store;
        no.backend = backend_.get();
        no.device = Device{DeviceType::kCUDA, static_cast<int16_t>(r)};
        return std::make_unique<NcclProcessGroup>(r, n, po, no);
      }));
    }
    std::vector<std::unique_ptr<NcclProcessGroup>> out;
    for (auto& f : fs) out.push_back(f.get());
    return out;
  }
  Tensor on_device(int r, const std::vector<float>& v, Shape s) {
    Tensor t = Tensor::empty(backend_.get(), Device{DeviceType::kCUDA, static_cast<int16_t>(r)}, DType::kFloat32,
                             std::move(s), nullptr);
    backend_->copy_to_device(t.device(), t.data(), v.data(), v.size() * sizeof(float));
    return t;
  }
  std::vector<float> host(const Tensor& t) {
    Tensor h = t.to_host();
    const float* p = static_cast<const float*>(h.data());
    return std::vector<float>(p, p + h.numel());
  }
  std::unique_ptr<Backend> backend_;
  int gpus_ = 0;
};

TEST_F(NcclTest, EveryCollectiveOnEveryVisibleGpu) {
  const int n = gpus_;
  auto pgs = group(n, "world");
  std::vector<std::vector<float>> xs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < 2 * n; ++i) xs[r].push_back(static_cast<float>(r * 100 + i));
  }
  std::vector<std::future<void>> fs;
  for (int r = 0; r < n; ++r) {
    fs.push_back(std::async(std::launch::async, [&, r] {
      NcclProcessGroup& pg = *pgs[static_cast<size_t>(r)];
      const Tensor x = on_device(r, xs[r], {2 * n});
      auto sum = pg.all_reduce(x, ReduceOp::kSum);
      sum->wait();
      auto mx = pg.all_reduce(x, ReduceOp::kMax);
      mx->wait();
      auto g = pg.all_gather(x);
      g->wait();
      auto rs = pg.reduce_scatter(x, ReduceOp::kSum);
      rs->wait();
      auto b = pg.broadcast(x, n - 1);
      b->wait();
      auto a2a = pg.all_to_all(x);
      a2a->wait();
      pg.barrier()->wait();
      std::vector<float> want_sum(2 * n, 0), want_max(2 * n, -1e30f), want_g;
      for (int q = 0; q < n; ++q) {
        for (int i = 0; i < 2 * n; ++i) {
          want_sum[i] += xs[q][i];
          want_max[i] = std::max(want_max[i], xs[q][i]);
        }
        want_g.insert(want_g.end(), xs[q].begin(), xs[q].end());
      }
      EXPECT_EQ(host(sum->result()), want_sum);
      EXPECT_EQ(host(mx->result()), want_max);
      EXPECT_EQ(host(g->result()), want_g);
      EXPECT_EQ(host(rs->result()), std::vector<float>(want_sum.begin() + 2 * r, want_sum.begin() + 2 * r + 2));
      EXPECT_EQ(host(b->result()), xs[n - 1]);
      std::vector<float> want_a2a;
      for (int q = 0; q < n; ++q) {
        want_a2a.push_back(xs[q][2 * r]);
        want_a2a.push_back(xs[q][2 * r + 1]);
      }
      EXPECT_EQ(host(a2a->result()), want_a2a);
      EXPECT_EQ(pg.last_seq(), 7u);
      auto d = pg.recorder()->dump();
      ASSERT_EQ(d.entries.size(), 7u);
      EXPECT_EQ(d.entries[0].profiling_name, "nccl:all_reduce");
      EXPECT_EQ(d.entries[6].profiling_name, "nccl:barrier");
      for (const auto& e : d.entries) EXPECT_EQ(e.state(), CollectiveState::kCompleted);
    }));
  }
  for (auto& f : fs) f.get();
}

TEST_F(NcclTest, HostTensorsAndMismatchedRanksFailByName) {
  auto pgs = group(gpus_, "world");
  // A host tensor is refused before a seq is taken.
  Tensor h = Tensor::zeros_host(DType::kFloat32, {4});
  try {
    pgs[0]->all_reduce(h);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  }
  EXPECT_EQ(pgs[0]->last_seq(), 0u);
  if (gpus_ < 2) GTEST_SKIP() << "ranks that disagree need two GPUs (this machine has " << gpus_ << ")";
  std::vector<std::future<void>> fs;
  for (int r = 0; r < gpus_; ++r) {
    fs.push_back(std::async(std::launch::async, [&, r] {
      const Tensor x = on_device(r, std::vector<float>(4 + r, 1.0f), {4 + r});
      auto w = pgs[static_cast<size_t>(r)]->all_reduce(x);
      try {
        w->wait();
        ADD_FAILURE() << "rank " << r << " did not fail";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kShapeMismatch) << e.message();
      }
    }));
  }
  for (auto& f : fs) f.get();
}
#else
TEST(Nccl, NotInThisBuild) {
  GTEST_SKIP() << "NCCL was not found when this build was configured (TENSORD_HAVE_NCCL unset)";
}
#endif

}  // namespace
}  // namespace tensord::dist
