// The lane operations the batched eigh kernels need (the Ops of
// ops/kernels/eigh_jacobi.h and eigh_tridiag.h), over GCC vector
// extensions, for a translation unit that has chosen its vector width:
// defines OpsF over VF (floats) and OpsD over VD (doubles) in an anonymous
// namespace. Before including, define
//   TENSORD_EIGH_VBYTES         the vector size in bytes (16, 32 or 64)
//   TENSORD_EIGH_SQRT_F(x) / _D(x)   a lane-wise square root of a VF / VD.
// Included once per ISA translation unit (see eigh_jacobi_impl.h).
#pragma once

#include <cstdint>

namespace tensord {
namespace {

// (GCC gives a vector type the alias set of its element type, so the
// float* / double* views of the workspace in eigh_jacobi_impl.h are fine.)
using VF = float __attribute__((vector_size(TENSORD_EIGH_VBYTES)));
using VD = double __attribute__((vector_size(TENSORD_EIGH_VBYTES)));

template <class V>
struct LaneOps {
  static V sqrt(V x);
  static V abs(V x) { return x < 0 ? -x : x; }
  template <class M>
  static V select(M m, V a, V b) {
    return m ? a : b;
  }
  static auto is_zero(V x) { return x == 0; }
  static auto is_negative(V x) { return x < 0; }
};

template <>
VF LaneOps<VF>::sqrt(VF x) {
  return TENSORD_EIGH_SQRT_F(x);
}
template <>
VD LaneOps<VD>::sqrt(VD x) {
  return TENSORD_EIGH_SQRT_D(x);
}

using OpsF = LaneOps<VF>;
using OpsD = LaneOps<VD>;

}  // namespace
}  // namespace tensord
