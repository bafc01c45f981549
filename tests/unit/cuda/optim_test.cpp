// The CUDA fused optimizers (ops/cuda/optim_fused.cu) against the CPU loop
// (ops/cpu/optim_loop.cpp), which both run ops/kernels/optim.h: one kernel
// launch per step for a list of mixed sizes and dtypes. Label "gpu": without
// a device every test skips, saying so.
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "ops/cpu/optim_loop.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/optim_fused.cuh"
#include "ops/kernels/float_conv.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

class CudaOptimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!make_cuda_backend())
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports " << cuda_device_count() << ")";
  }
};

// Host and device copies of one tensor's streams (float32 or bfloat16).
struct Streams {
  DType dtype;
  int64_t n;
  std::vector<std::vector<uint8_t>> host;  // param, grad, s0, s1, s2, param_out, s0_out, s1_out, s2_out
  std::vector<void*> dev;
  Streams(DType dt, int64_t numel, std::mt19937& rng) : dtype(dt), n(numel), host(9), dev(9, nullptr) {
    std::normal_distribution<float> nd(0.f, 1.f);
    const size_t es = dtype_size(dt);
    for (int k = 0; k < 9; ++k) {
      host[static_cast<size_t>(k)].resize(static_cast<size_t>(n) * es);
      for (int64_t i = 0; i < n; ++i) {
        float v = k == 3 || k == 4 ? std::abs(nd(rng)) : nd(rng);  // second moments are >= 0
        if (dt == DType::kFloat32) {
          reinterpret_cast<float*>(host[static_cast<size_t>(k)].data())[i] = v;
        } else {
          reinterpret_cast<uint16_t*>(host[static_cast<size_t>(k)].data())[i] = kernels::f32_to_bf16(v);
        }
      }
      EXPECT_EQ(cudaMalloc(&dev[static_cast<size_t>(k)], host[static_cast<size_t>(k)].size()), cudaSuccess);
      cudaMemcpy(dev[static_cast<size_t>(k)], host[static_cast<size_t>(k)].data(), host[static_cast<size_t>(k)].size(),
                 cudaMemcpyHostToDevice);
    }
  }
  ~Streams() {
    for (void* p : dev) cudaFree(p);
  }
  OptimTensorIO io(bool device, int states, bool with_state) {
    OptimTensorIO t;
    t.dtype = dtype;
    t.numel = n;
    t.step = 3;
    auto ptr = [&](int k) { return device ? dev[static_cast<size_t>(k)] : host[static_cast<size_t>(k)].data(); };
    t.param = ptr(0);
    t.grad = ptr(1);
    t.param_out = ptr(5);
    for (int k = 0; k < states; ++k) {
      t.state_in[k] = with_state ? ptr(2 + k) : nullptr;
      t.state_out[k] = ptr(6 + k);
    }
    return t;
  }
  std::vector<float> out(int k) {
    std::vector<uint8_t> b(host[static_cast<size_t>(k)].size());
    cudaMemcpy(b.data(), dev[static_cast<size_t>(k)], b.size(), cudaMemcpyDeviceToHost);
    return as_float(b);
  }
  std::vector<float> cpu_out(int k) { return as_float(host[static_cast<size_t>(k)]); }
  std::vector<float> as_float(const std::vector<uint8_t>& b) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      v[static_cast<size_t>(i)] = dtype == DType::kFloat32
                                      ? reinterpret_cast<const float*>(b.data())[i]
                                      : kernels::bf16_to_f32(reinterpret_cast<const uint16_t*>(b.data())[i]);
    }
    return v;
  }
};

void expect_close(const std::vector<float>& a, const std::vector<float>& b, double tol, const char* what) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, static_cast<double>(std::abs(a[i] - b[i])));
    den = std::max(den, static_cast<double>(std::abs(b[i])));
  }
  EXPECT_LE(num / std::max(den, 1e-30), tol) << what;
}

template <class Hyper, class CpuFn, class CudaFn>
void compare(int states, bool with_state, const Hyper& h, CpuFn cpu, CudaFn cuda) {
  std::mt19937 rng(5);
  std::vector<std::unique_ptr<Streams>> ss;
  for (int64_t n : {int64_t{1000003}, int64_t{37}, int64_t{65536}, int64_t{1}}) {
    ss.push_back(std::make_unique<Streams>(DType::kFloat32, n, rng));
  }
  ss.push_back(std::make_unique<Streams>(DType::kBFloat16, 4099, rng));
  std::vector<OptimTensorIO> host_io, dev_io;
  for (auto& s : ss) {
    host_io.push_back(s->io(false, states, with_state));
    dev_io.push_back(s->io(true, states, with_state));
  }
  OpContext ctx;
  cpu(ctx, h, host_io);
  const int64_t before = cuda::optim_kernel_launches();
  cuda(h, dev_io, nullptr);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(cuda::optim_kernel_launches() - before, 1);  // one launch for the whole list
  for (auto& s : ss) {
    // The device contracts a*b+c into FMAs; the CPU loop does not.
    const double tol = s->dtype == DType::kFloat32 ? 1e-6 : 8e-3;
    expect_close(s->out(5), s->cpu_out(5), tol, "param");
    for (int k = 0; k < states; ++k) expect_close(s->out(6 + k), s->cpu_out(6 + k), tol, "state");
  }
}

TEST_F(CudaOptimTest, AdamAndAdamWMatchTheCpuLoop) {
  for (bool adamw : {false, true}) {
    for (bool ams : {false, true}) {
      kernels::AdamHyper h;
      h.adamw = adamw;
      h.amsgrad = ams;
      h.weight_decay = 0.01;
      h.maximize = ams;
      compare(ams ? 3 : 2, true, h, fused_adam_cpu, cuda::fused_adam_cuda);
      compare(ams ? 3 : 2, false, h, fused_adam_cpu, cuda::fused_adam_cuda);
    }
  }
}

TEST_F(CudaOptimTest, SgdMatchesTheCpuLoop) {
  kernels::SgdHyper h;
  h.lr = 0.1;
  compare(0, false, h, fused_sgd_cpu, cuda::fused_sgd_cuda);
  h.momentum = 0.9;
  h.dampening = 0.1;
  compare(1, true, h, fused_sgd_cpu, cuda::fused_sgd_cuda);
  compare(1, false, h, fused_sgd_cpu, cuda::fused_sgd_cuda);  // first step: buffer = grad
  h.dampening = 0;
  h.nesterov = true;
  h.weight_decay = 0.05;
  compare(1, true, h, fused_sgd_cpu, cuda::fused_sgd_cuda);
}

TEST_F(CudaOptimTest, AdagradMatchesTheCpuLoop) {
  kernels::AdagradHyper h;
  h.lr_decay = 0.1;
  h.initial_accumulator_value = 0.2;
  compare(1, true, h, fused_adagrad_cpu, cuda::fused_adagrad_cuda);
  compare(1, false, h, fused_adagrad_cpu, cuda::fused_adagrad_cuda);
}

}  // namespace
}  // namespace tensord
