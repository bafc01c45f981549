// The batched eigensolvers' seam between the dispatcher (eigh_batched.cpp,
// built for the baseline ISA) and the per-ISA kernels
// (eigh_jacobi_portable.cpp / _avx2.cpp / _avx512.cpp, each built with its
// own -m flags and holding both algorithms: eigh_isa_table.h). Plain data
// and function pointers only: nothing inline that an ISA-specific
// translation unit could emit and the linker then share.
#pragma once

#include <cstdint>

namespace tensord {

// Trivial aggregates (no default member initializers: no inline
// constructors); value-initialise them with {}.

// One group: up to `lanes` matrices solved together, one per SIMD lane.
struct EighGroupArgs {
  const void* in;  // `count` row-major n x n matrices, contiguous
  int64_t count;   // 1 .. lanes
  int n;
  bool lower;  // read the lower ('L') triangle, else the upper
  void* w;     // count x n eigenvalues (real dtype), ascending
  void* v;     // count x n x n eigenvectors as columns, or null
  void* work;  // eigh_group_work_bytes(), 64-byte aligned
};

enum : int { kEighOk = 0, kEighNonFinite = 1, kEighNoConvergence = 2 };

// The tridiagonal QL defers its eigenvector rotations and applies this many
// sweeps' worth in one pass over Z (eigh_tridiag_impl.h); its workspace is
// n (n + 1) / 2 + n^2 + (5 + 2 kEighTridiagSweepsPerPass) n vectors + lanes n ints.
enum : int { kEighTridiagSweepsPerPass = 8 };

// Returns kEighOk, or an error with *bad the offending matrix in the group.
using EighGroupFn = int (*)(const EighGroupArgs&, int64_t* bad);

// Index by dtype: 0 float32, 1 float64, 2 complex64, 3 complex128.
struct EighIsaKernels {
  const char* name;
  int lanes[4];            // matrices per group
  int vector_bytes[4];     // bytes of one SIMD vector (alignment)
  int complex_planes[4];   // 1 real, 2 complex
  EighGroupFn jacobi[4];   // cyclic Jacobi (eigh_jacobi_impl.h), all dtypes
  EighGroupFn tridiag[4];  // Householder + implicit QL (eigh_tridiag_impl.h), real only: [2], [3] null
};

// Null where the compiler could not build that ISA (non-x86 targets).
const EighIsaKernels* eigh_kernels_portable();
const EighIsaKernels* eigh_kernels_avx2();
const EighIsaKernels* eigh_kernels_avx512();

}  // namespace tensord
