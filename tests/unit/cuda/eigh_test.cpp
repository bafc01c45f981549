// cuSOLVER batched eigh on a real device (label "gpu"): host matrices are
// copied to the device, decomposed, copied back and checked like the CPU
// paths (residual, orthogonality, ascending, eigenvalues against the CPU
// LAPACK path in float64). Skips, saying why, without a device.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/convert.h"
#include "ops/cpu/linalg_kernels.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/eigh_batched.cuh"
#include "ops/error.h"
#include "ops/op_registry.h"
#include "ops/tensor.h"

namespace tensord {
namespace {

using Cd = std::complex<double>;

class CudaEighTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!make_cuda_backend())
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports " << cuda_device_count() << ")";
  }
};

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes ? bytes : 1), cudaSuccess); }
  ~DevBuf() { cudaFree(p); }
};

// Runs the device path on host tensor x; returns (w, v) as host tensors.
std::pair<Tensor, Tensor> run_device(const Tensor& x, bool upper) {
  const int64_t n = x.shape().back();
  const int64_t batch = x.numel() / (n * n);
  Tensor w = Tensor::empty_host(to_real(x.dtype()), Shape(x.shape().begin(), x.shape().end() - 1));
  Tensor v = Tensor::empty_host(x.dtype(), x.shape());
  DevBuf a(x.nbytes()), dw(w.nbytes()), dv(v.nbytes());
  cudaStream_t s = nullptr;
  EXPECT_EQ(cudaStreamCreate(&s), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(a.p, x.data(), x.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
  try {
    cuda::cuda_eigh_batched(x.dtype(), batch, n, a.p, dw.p, dv.p, upper, true, s);
  } catch (...) {
    cudaStreamDestroy(s);
    throw;
  }
  EXPECT_EQ(cudaMemcpy(w.data(), dw.p, w.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(v.data(), dv.p, v.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaStreamDestroy(s);
  return {w, v};
}

// Random Hermitian (uplo triangle; garbage in the other one).
Tensor random_input(DType t, const Shape& shape, bool upper, uint32_t seed, std::vector<Cd>* full) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor x = Tensor::empty_host(t, shape);
  const int64_t n = shape.back(), batch = x.numel() / (n * n);
  full->assign(static_cast<size_t>(x.numel()), Cd());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        const Cd z(u(rng), is_complex(t) && i != j ? u(rng) : 0.0);
        (*full)[static_cast<size_t>(b * n * n + i * n + j)] = z;
        (*full)[static_cast<size_t>(b * n * n + j * n + i)] = std::conj(z);
      }
    }
  }
  for (int64_t e = 0; e < x.numel(); ++e) {
    const int64_t i = (e / n) % n, j = e % n;
    const bool in = upper ? j >= i : j <= i;
    store_from_complex(t, x.data(), e, in ? (*full)[static_cast<size_t>(e)] : Cd(1e3, 0));
  }
  return x;
}

void check(DType t, const Shape& shape, bool upper) {
  SCOPED_TRACE(std::string(dtype_name(t)) + " " + shape_str(shape) + (upper ? " U" : " L"));
  std::vector<Cd> full;
  const Tensor x = random_input(t, shape, upper, 5, &full);
  auto [w, v] = run_device(x, upper);
  const int64_t n = shape.back(), batch = x.numel() / (n * n);
  const bool single = t == DType::kFloat32 || t == DType::kComplex64;
  const double tol = (single ? 2e-6 : 1e-13) * std::sqrt(static_cast<double>(n));
  // Reference eigenvalues: the CPU LAPACK path in double precision.
  std::vector<Cd> unused;
  const DType rt = is_complex(t) ? DType::kComplex128 : DType::kFloat64;
  const Tensor xr = random_input(rt, shape, upper, 5, &unused);
  Tensor wr = Tensor::empty_host(DType::kFloat64, w.shape());
  OpContext ctx;
  eigh_cpu(ctx, xr, upper ? 'U' : 'L', wr, nullptr, "linalg.eigh", EighPath::kLapack);
  for (int64_t b = 0; b < batch; ++b) {
    const Cd* A = &full[static_cast<size_t>(b * n * n)];
    double an = 0, res = 0, orth = 0;
    for (int64_t i = 0; i < n * n; ++i) an += std::norm(A[i]);
    auto V = [&](int64_t r, int64_t c) { return load_as_complex(t, v.data(), b * n * n + r * n + c); };
    auto W = [&](int64_t j) { return load_as_complex(to_real(t), w.data(), b * n + j).real(); };
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        Cd av = 0, vhv = 0;
        for (int64_t k = 0; k < n; ++k) {
          av += A[i * n + k] * V(k, j);
          vhv += std::conj(V(k, i)) * V(k, j);
        }
        res += std::norm(av - V(i, j) * W(j));
        orth += std::norm(vhv - Cd(i == j ? 1 : 0));
      }
      if (i + 1 < n) {
        EXPECT_LE(W(i), W(i + 1));
      }
      EXPECT_NEAR(W(i), wr.data_ptr<double>()[b * n + i], tol * std::max(1.0, std::sqrt(an)));
    }
    EXPECT_LE(std::sqrt(res), tol * std::max(std::sqrt(an), 1e-300)) << "matrix " << b;
    EXPECT_LE(std::sqrt(orth), single ? 1e-5 * static_cast<double>(n) : tol) << "matrix " << b;
  }
}

TEST_F(CudaEighTest, ResidualOrthogonalityAllDtypes) {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kComplex64, DType::kComplex128}) {
    for (bool upper : {false, true}) {
      check(t, {2, 3, 6, 6}, upper);
      check(t, {1, 1}, upper);
      check(t, {100, 16, 16}, upper);
      check(t, {2, 64, 64}, upper);
    }
  }
  check(DType::kFloat64, {1, 300, 300}, false);
}

TEST_F(CudaEighTest, NonFiniteIsNumericalError) {
  std::vector<Cd> full;
  Tensor x = random_input(DType::kFloat32, {5, 4, 4}, false, 1, &full);
  x.data_ptr<float>()[3 * 16 + 2 * 4 + 1] = std::numeric_limits<float>::quiet_NaN();
  try {
    run_device(x, false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNumericalError);
    EXPECT_NE(e.message().find("matrix 3"), std::string::npos) << e.message();
  }
  EXPECT_NO_THROW(run_device(x, true));  // the NaN is outside the upper triangle
  cuda::cuda_eigh_release_workspace();
}

}  // namespace
}  // namespace tensord
