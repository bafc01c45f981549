// CPU linear-algebra kernels behind ops/cpu/linalg.cpp: matmul over OpenBLAS
// (matmul_blas.cpp) and eigh: batched SIMD Jacobi (eigh_batched.cpp) or
// LAPACKE (eigh_lapack.cpp).
//
// Threading: OpenBLAS is pinned to one thread (set_blas_single_threaded) and
// the work is split over the OpContext's pool instead (batch items, and
// row/column tiles of big products), so a CPU partition's kernels stay on its
// own worker threads.
#pragma once

#include <cstdint>

#include "ops/shape.h"
#include "ops/tensor.h"

namespace tensord {

struct OpContext;

// torch.matmul's shape rules: 1-D x 1-D is a dot product, a 1-D operand is
// promoted to a matrix ([k] -> [1, k] on the left, [k, 1] on the right) and
// the added dim removed from the result, batch dims broadcast.
struct MatmulPlan {
  Shape out;               // result shape
  Shape batch;             // broadcast batch shape
  Shape a_batch, b_batch;  // the operands' own batch shapes
  int64_t m = 0, k = 0, n = 0;
};
// Throws shape_mismatch ("matmul: ...") for 0-d operands or mismatched
// inner or batch dims.
MatmulPlan matmul_plan(const Shape& a, const Shape& b);
// a and b have the same dtype, one of float16, bfloat16, float32, float64,
// complex64, complex128, uint8, int8, int16, int32, int64.
bool matmul_dtype_supported(DType t);
Tensor matmul_cpu(const OpContext& ctx, const Tensor& a, const Tensor& b);

// Once per process: OpenBLAS runs single-threaded in the calling thread.
void set_blas_single_threaded();

// Eigen-decomposition of each Hermitian matrix of `a` (..., n, n; float32,
// float64, complex64 or complex128), reading only the `uplo` ('L' or 'U')
// triangle. Writes ascending eigenvalues to `w` (..., n; real dtype) and, if
// `v` is not null, orthonormal eigenvectors as the columns of `*v`
// (..., n, n). Throws numerical_error naming `op` for non-finite input or
// when the solver does not converge.
//
// Two paths (eigh_batched.cpp picks by measured crossover, eigh_use_jacobi):
// a batched cyclic Jacobi with one matrix per SIMD lane (small n, many
// matrices) and LAPACK's syevd/heevd per matrix (eigh_lapack.cpp). Tests
// force each path; kAuto is what the op uses.
enum class EighPath { kAuto, kLapack, kJacobiPortable, kJacobiAvx2, kJacobiAvx512 };
void eigh_cpu(const OpContext& ctx, const Tensor& a, char uplo, const Tensor& w, const Tensor* v, const char* op,
              EighPath path = EighPath::kAuto);
// Whether this CPU (and build) can run `path`.
bool eigh_path_available(EighPath path);
// The ISA the automatic Jacobi path uses ("avx512", "avx2", "portable").
const char* eigh_jacobi_isa_name();
// The automatic choice: true for the Jacobi path.
bool eigh_use_jacobi(DType t, int64_t n, int64_t batch);
// The two paths themselves (same contract as eigh_cpu; Jacobi takes n <= 128
// and path kAuto means the widest ISA allowed).
void eigh_lapack_cpu(const OpContext& ctx, const Tensor& a, char uplo, const Tensor& w, const Tensor* v,
                     const char* op);
void eigh_jacobi_cpu(const OpContext& ctx, const Tensor& a, char uplo, const Tensor& w, const Tensor* v, const char* op,
                     EighPath path);

}  // namespace tensord
