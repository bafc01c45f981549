// Linear algebra on CUDA: matmul of float32 matrices through cuBLAS, and
// linalg.eigh / linalg.eigvalsh through ops/cuda/eigh_batched.cu. Other
// shapes (vectors, batches) and dtypes run on the CPU kernels.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/eigh_batched.cuh"
#include "ops/error.h"

namespace tensord::cuda {
namespace {

// This thread's cuBLAS handle, made on its current device: a thread runs
// kernels on one GPU only (a partition runner on the scheduler's, an SPMD
// rank's thread on its own: scheduler/spmd/spmd_run.h).
cublasHandle_t blas_handle() {
  struct Handle {
    cublasHandle_t h = nullptr;
    ~Handle() {
      if (h) cublasDestroy(h);
    }
  };
  thread_local Handle handle;
  if (!handle.h && cublasCreate(&handle.h) != CUBLAS_STATUS_SUCCESS) {
    handle.h = nullptr;
    throw Error(ErrorCode::kInternal, "cublasCreate failed");
  }
  return handle.h;
}

void blas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw Error(ErrorCode::kInternal, std::string(what) + " failed with cuBLAS status " + std::to_string(s));
  }
}

void add_matmul(OpRegistry& r) {
  OpDef* d = r.find_mutable("matmul");
  TENSORD_ASSERT(d != nullptr);
  d->accepts["cuda"] = [](const OpArgs<TensorMeta>& a) {
    const TensorMeta& x = a.tensor(0);
    const TensorMeta& y = a.tensor(1);
    return x.dtype == DType::kFloat32 && y.dtype == DType::kFloat32 && x.dim() == 2 && y.dim() == 2 &&
           x.shape[1] < (int64_t{1} << 31) && x.shape[0] < (int64_t{1} << 31) && y.shape[1] < (int64_t{1} << 31);
  };
  d->kernels["cuda"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    const Tensor& y = a.tensor(1);
    const int m = static_cast<int>(x.shape()[0]), k = static_cast<int>(x.shape()[1]);
    const int n = static_cast<int>(y.shape()[1]);
    Tensor out = ctx.empty(DType::kFloat32, {m, n});
    if (out.numel() == 0) return std::vector<Tensor>{out};
    if (k == 0) {
      TENSORD_CUDA_CHECK(cudaMemsetAsync(out.data(), 0, out.nbytes(), raw_stream(ctx)));
      return std::vector<Tensor>{out};
    }
    cublasHandle_t h = blas_handle();
    blas_check(cublasSetStream(h, raw_stream(ctx)), "cublasSetStream");
    // Row-major C = A B is column-major C^T = B^T A^T: no transposes, the
    // operands swapped.
    const float one = 1.f, zero = 0.f;
    blas_check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, y.data_ptr<float>(), n, x.data_ptr<float>(), k,
                           &zero, out.data_ptr<float>(), n),
               "cublasSgemm");
    return std::vector<Tensor>{out};
  };
}

void add_eigh(OpRegistry& r, const char* name, bool vectors) {
  OpDef* d = r.find_mutable(name);
  TENSORD_ASSERT(d != nullptr);
  d->kernels["cuda"] = [vectors](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    const std::string& uplo = a.attr(1).to_string("UPLO");
    const bool upper = uplo == "U" || uplo == "u";
    const int64_t n = x.shape().back();
    const int64_t batch = n ? x.numel() / (n * n) : 0;
    Shape ws(x.shape().begin(), x.shape().end() - 1);
    Tensor w = ctx.empty(to_real(x.dtype()), ws);
    Tensor v = vectors ? ctx.empty(x.dtype(), x.shape()) : Tensor();
    if (batch > 0 && n > 0) {
      cuda_eigh_batched(x.dtype(), batch, n, x.data(), w.data(), vectors ? v.data() : nullptr, upper, vectors,
                        raw_stream(ctx));
    }
    return vectors ? std::vector<Tensor>{w, v} : std::vector<Tensor>{w};
  };
}

}  // namespace

void register_linalg_kernels(OpRegistry& r) {
  add_matmul(r);
  add_eigh(r, "linalg.eigh", true);
  add_eigh(r, "linalg.eigvalsh", false);
}

}  // namespace tensord::cuda
