// CPU linear-algebra kernels behind ops/cpu/linalg.cpp: matmul over OpenBLAS
// (matmul_blas.cpp) and eigh: batched SIMD Jacobi or tridiagonal QL
// (eigh_batched.cpp) or LAPACKE (eigh_lapack.cpp).
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

// matmul with an MX operand (ops/cpu/matmul_mx.cpp): either or both sides
// MX tensors (their logical shapes), any other operand float32; float32
// result; the MX side dequantized a panel at a time. matmul_takes_mx: either
// meta is MX. check_matmul_mx_dtypes throws dtype_mismatch for a non-MX
// operand that is not float32.
bool matmul_takes_mx(const TensorMeta& a, const TensorMeta& b);
void check_matmul_mx_dtypes(const TensorMeta& a, const TensorMeta& b);
Tensor matmul_mx_cpu(const OpContext& ctx, const Tensor& a, const Tensor& b);

// Once per process: OpenBLAS runs single-threaded in the calling thread.
void set_blas_single_threaded();

// Eigen-decomposition of each Hermitian matrix of `a` (..., n, n; float32,
// float64, complex64 or complex128), reading only the `uplo` ('L' or 'U')
// triangle. Writes ascending eigenvalues to `w` (..., n; real dtype) and, if
// `v` is not null, orthonormal eigenvectors as the columns of `*v`
// (..., n, n). Throws numerical_error naming `op` for non-finite input or
// when the solver does not converge.
//
// Three paths (eigh_batched.cpp picks by measured crossover,
// eigh_auto_algorithm): LAPACK's syevd/heevd per matrix (eigh_lapack.cpp),
// and two batched solvers with one matrix per SIMD lane: cyclic Jacobi
// (small n; complex) and Householder tridiagonalisation + implicit QL (real,
// larger n). Tests force each path; kAuto is what the op uses. A kTridiag*
// path on a complex dtype runs that ISA's Jacobi.
enum class EighPath {
  kAuto,
  kLapack,
  kJacobiPortable,
  kJacobiAvx2,
  kJacobiAvx512,
  kTridiagPortable,
  kTridiagAvx2,
  kTridiagAvx512
};
enum class EighAlgorithm { kLapack, kJacobi, kTridiag };
void eigh_cpu(const OpContext& ctx, const Tensor& a, char uplo, const Tensor& w, const Tensor* v, const char* op,
              EighPath path = EighPath::kAuto);
// Whether this CPU (and build) can run `path`.
bool eigh_path_available(EighPath path);
// The ISA the automatic SIMD paths use ("avx512", "avx2", "portable").
const char* eigh_jacobi_isa_name();
// The automatic choice for `batch` matrices n x n of dtype t.
EighAlgorithm eigh_auto_algorithm(DType t, int64_t n, int64_t batch);
// The paths themselves (same contract as eigh_cpu). eigh_simd_cpu takes a
// Jacobi (n <= 128) or tridiagonal (n <= 256, real) path; kAuto means the
// widest ISA's Jacobi.
void eigh_lapack_cpu(const OpContext& ctx, const Tensor& a, char uplo, const Tensor& w, const Tensor* v,
                     const char* op);
void eigh_simd_cpu(const OpContext& ctx, const Tensor& a, char uplo, const Tensor& w, const Tensor* v, const char* op,
                   EighPath path);

}  // namespace tensord
