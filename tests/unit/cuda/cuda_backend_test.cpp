// The CUDA backend on a real device (label "gpu"). Without a device every
// test skips, saying so; the binary itself proves the backend links and loads
// without a driver.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ops/cuda/cuda_backend.h"
#include "ops/error.h"
#include "ops/memory_account.h"
#include "ops/tensor.h"

namespace tensord {
namespace {

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = make_cuda_backend();
    if (!backend_) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports " << cuda_device_count() << ")";
  }
  std::unique_ptr<Backend> backend_;
};

TEST(CudaNoDevice, FactoryAnswersWithoutDriver) {
  // Must not crash or throw on a machine with no driver: either a device
  // count > 0 and a backend, or 0 and nullptr.
  int n = cuda_device_count();
  auto b = make_cuda_backend();
  EXPECT_EQ(n > 0, b != nullptr);
}

TEST_F(CudaBackendTest, DevicesReportMemoryAndSms) {
  auto devs = backend_->devices();
  ASSERT_FALSE(devs.empty());
  EXPECT_EQ(devs[0].device.type, DeviceType::kCUDA);
  EXPECT_GT(devs[0].total_memory, 0);
  EXPECT_GT(devs[0].compute_units, 0);
  EXPECT_TRUE(backend_->libraries().count("cusolver"));
}

TEST_F(CudaBackendTest, HostDeviceRoundTripAndAccounting) {
  Device d{DeviceType::kCUDA, 0};
  auto acct = std::make_shared<MemoryAccount>("t", 1 << 20);
  std::vector<float> host(1000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 0.5f;
  {
    Tensor t = Tensor::empty(backend_.get(), d, DType::kFloat32, {1000}, acct);
    EXPECT_EQ(acct->used(), 4000);
    backend_->copy_to_device(d, t.data(), host.data(), 4000);
    Tensor u = Tensor::empty(backend_.get(), d, DType::kFloat32, {1000}, acct);
    Stream s = backend_->create_stream(d);
    backend_->copy_on_device(s, u.data(), t.data(), 4000);
    Event e = backend_->record_event(s);
    Stream s2 = backend_->create_stream(d);
    backend_->wait_event(s2, e);
    backend_->synchronize(s2);
    backend_->synchronize(s);
    std::vector<float> back(1000, -1.f);
    backend_->copy_to_host(d, back.data(), u.data(), 4000);
    EXPECT_EQ(0, std::memcmp(back.data(), host.data(), 4000));
    EXPECT_FALSE(backend_->is_capturing(s));
    backend_->destroy_stream(s);
    backend_->destroy_stream(s2);
  }
  EXPECT_EQ(acct->used(), 0);
}

TEST_F(CudaBackendTest, CaptureReplaysCopiesAndHostFuncsInOrder) {
  Device d{DeviceType::kCUDA, 0};
  auto acct = std::make_shared<MemoryAccount>("t", 1 << 20);
  Tensor a = Tensor::empty(backend_.get(), d, DType::kFloat32, {256}, acct);
  Tensor b = Tensor::empty(backend_.get(), d, DType::kFloat32, {256}, acct);
  std::vector<float> host(256, 2.5f), back(256, 0.f);
  backend_->copy_to_device(d, a.data(), host.data(), 1024);
  Stream s = backend_->create_stream(d);
  int host_runs = 0;
  backend_->begin_capture(s);
  EXPECT_TRUE(backend_->is_capturing(s));
  backend_->copy_on_device(s, b.data(), a.data(), 1024);
  backend_->launch_host_func(s, [&] { ++host_runs; });
  auto g = backend_->end_capture(s);
  EXPECT_FALSE(backend_->is_capturing(s));
  EXPECT_EQ(g->nodes(), 2u);
  EXPECT_EQ(host_runs, 0);  // captured, not run
  backend_->launch_graph(s, *g);
  backend_->launch_graph(s, *g);
  backend_->synchronize(s);
  EXPECT_EQ(host_runs, 2);
  backend_->copy_to_host(d, back.data(), b.data(), 1024);
  EXPECT_EQ(back[255], 2.5f);
  backend_->destroy_stream(s);
}

TEST_F(CudaBackendTest, PartitionStreamsRunWork) {
  // With green contexts the streams live in the partitions' contexts;
  // without, they are plain streams: either way work on them completes.
  backend_->set_partitions({{"a", 0.5, 2}, {"b", 0.5, 1}});
  Device d{DeviceType::kCUDA, 0};
  auto acct = std::make_shared<MemoryAccount>("t", 1 << 20);
  Tensor a = Tensor::empty(backend_.get(), d, DType::kFloat32, {64}, acct);
  Tensor b = Tensor::empty(backend_.get(), d, DType::kFloat32, {64}, acct);
  std::vector<float> host(64, 7.f), back(64, 0.f);
  backend_->copy_to_device(d, a.data(), host.data(), 256);
  for (int p : {0, 1}) {
    Stream s = backend_->create_partition_stream(d, p);
    backend_->copy_on_device(s, b.data(), a.data(), 256);
    backend_->synchronize(s);
    backend_->copy_to_host(d, back.data(), b.data(), 256);
    EXPECT_EQ(back[63], 7.f) << "partition " << p;
    backend_->destroy_stream(s);
  }
}

TEST_F(CudaBackendTest, QuotaRefusesBeforeAllocating) {
  Device d{DeviceType::kCUDA, 0};
  auto acct = std::make_shared<MemoryAccount>("t", 100);
  EXPECT_THROW(Tensor::empty(backend_.get(), d, DType::kFloat32, {1000}, acct), Error);
  EXPECT_EQ(acct->used(), 0);
}

}  // namespace
}  // namespace tensord
