// The batched eigensolvers (Jacobi, tridiagonal QL) on AVX-512F: 16 float32 / 8 float64
// matrices per group. Built with -mavx512f -mavx2 -mfma (ops/CMakeLists.txt);
// called only when CPUID reports AVX-512F (eigh_batched.cpp).
#if defined(__AVX512F__) && defined(__FMA__)
#include <immintrin.h>

#define TENSORD_EIGH_VBYTES 64
// The maskz forms: GCC 12 warns (maybe-uninitialized) inside the plain ones.
#define TENSORD_EIGH_SQRT_F(x) ((VF)_mm512_maskz_sqrt_ps(static_cast<__mmask16>(0xFFFF), (__m512)(x)))
#define TENSORD_EIGH_SQRT_D(x) ((VD)_mm512_maskz_sqrt_pd(static_cast<__mmask8>(0xFF), (__m512d)(x)))

#include "ops/cpu/eigh_isa_table.h"
#include "ops/cpu/eigh_jacobi_ops.h"

namespace tensord {

const EighIsaKernels* eigh_kernels_avx512() {
  static const EighIsaKernels k = make_kernels<OpsF, VF, OpsD, VD>("avx512");
  return &k;
}

}  // namespace tensord
#else
#include "ops/cpu/eigh_batched.h"

namespace tensord {

const EighIsaKernels* eigh_kernels_avx512() {
  return nullptr;
}

}  // namespace tensord
#endif
