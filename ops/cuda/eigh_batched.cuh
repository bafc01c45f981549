// Batched Hermitian eigendecomposition on device buffers through cuSOLVER:
// cusolverDnXsyevBatched where the toolkit has it (CUDA >= 12.6.2), else
// cusolverDn<t>syevjBatched (sorted output) for n <= 32 and
// cusolverDnXsyevd per matrix above. Same contract as the CPU
// linalg.eigh: row-major (batch, n, n) input of which only the `upper` (or
// lower) triangle is read; ascending eigenvalues (batch, n) in the real
// dtype; eigenvectors as columns, row-major (batch, n, n), if `vectors`.
// Runs on `stream`; returns after the stream has finished (info is checked
// per matrix). Raw cudaStream_t stays under ops/cuda/.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/dtype.h"

namespace tensord::cuda {

// dtype: float32, float64, complex64 or complex128. a_dev is not modified.
// Throws Error: numerical_error for non-finite input or a matrix that does
// not converge (naming the matrix), dtype_mismatch for other dtypes,
// internal for CUDA/cuSOLVER failures.
void cuda_eigh_batched(DType dtype, int64_t batch, int64_t n, const void* a_dev, void* w_dev, void* v_dev, bool upper,
                       bool vectors, cudaStream_t stream);

// Frees this thread's cached cuSOLVER handle and workspaces (also done at
// thread exit).
void cuda_eigh_release_workspace();

}  // namespace tensord::cuda
