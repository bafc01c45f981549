// The batched eigensolvers (Jacobi, tridiagonal QL) for any CPU: 16-byte GCC vectors (SSE2 on
// x86-64, NEON on arm64, plain scalars elsewhere), square roots lane by lane.
// The fallback of the runtime dispatch in eigh_batched.cpp and the path
// TENSORD_CPU_ISA=portable forces.
#define TENSORD_EIGH_VBYTES 16
#define TENSORD_EIGH_SQRT_F(x) ::tensord::lane_sqrt(x)
#define TENSORD_EIGH_SQRT_D(x) ::tensord::lane_sqrt(x)

#include "ops/cpu/eigh_isa_table.h"

namespace tensord {
namespace {

template <class V>
V lane_sqrt(V x) {
  V r = x;
  for (int i = 0; i < static_cast<int>(sizeof(V) / sizeof(x[0])); ++i) r[i] = __builtin_sqrt(x[i]);
  return r;
}

}  // namespace
}  // namespace tensord

#include "ops/cpu/eigh_jacobi_ops.h"

namespace tensord {

const EighIsaKernels* eigh_kernels_portable() {
  static const EighIsaKernels k = make_kernels<OpsF, VF, OpsD, VD>("portable");
  return &k;
}

}  // namespace tensord
