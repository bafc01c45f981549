// The batched eigensolvers (Jacobi, tridiagonal QL) on AVX2 + FMA: 8 float32 / 4 float64
// matrices per group. Built with -mavx2 -mfma (ops/CMakeLists.txt); called
// only when CPUID reports both (eigh_batched.cpp).
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#define TENSORD_EIGH_VBYTES 32
#define TENSORD_EIGH_SQRT_F(x) ((VF)_mm256_sqrt_ps((__m256)(x)))
#define TENSORD_EIGH_SQRT_D(x) ((VD)_mm256_sqrt_pd((__m256d)(x)))

#include "ops/cpu/eigh_isa_table.h"
#include "ops/cpu/eigh_jacobi_ops.h"

namespace tensord {

const EighIsaKernels* eigh_kernels_avx2() {
  static const EighIsaKernels k = make_kernels<OpsF, VF, OpsD, VD>("avx2");
  return &k;
}

}  // namespace tensord
#else
#include "ops/cpu/eigh_batched.h"

namespace tensord {

const EighIsaKernels* eigh_kernels_avx2() {
  return nullptr;
}

}  // namespace tensord
#endif
