// The table of one ISA's batched eigh kernels (eigh_batched.h's
// EighIsaKernels): the cyclic Jacobi for all four dtypes and the
// tridiagonal QL for the real ones. Included by each per-ISA translation
// unit after it has defined VF / VD and OpsF / OpsD (eigh_jacobi_ops.h).
#pragma once

#include "ops/cpu/eigh_jacobi_impl.h"
#include "ops/cpu/eigh_tridiag_impl.h"

namespace tensord {
namespace {

template <class OpsF, class VF, class OpsD, class VD>
EighIsaKernels make_kernels(const char* name) {
  constexpr int wf = static_cast<int>(sizeof(VF) / sizeof(float));
  constexpr int wd = static_cast<int>(sizeof(VD) / sizeof(double));
  EighIsaKernels k{};
  k.name = name;
  k.lanes[0] = wf;
  k.lanes[1] = wd;
  k.lanes[2] = wf;
  k.lanes[3] = wd;
  k.vector_bytes[0] = k.vector_bytes[2] = static_cast<int>(sizeof(VF));
  k.vector_bytes[1] = k.vector_bytes[3] = static_cast<int>(sizeof(VD));
  k.complex_planes[0] = k.complex_planes[1] = 1;
  k.complex_planes[2] = k.complex_planes[3] = 2;
  k.jacobi[0] = &eigh_jacobi_group<OpsF, VF, float, wf, false>;
  k.jacobi[1] = &eigh_jacobi_group<OpsD, VD, double, wd, false>;
  k.jacobi[2] = &eigh_jacobi_group<OpsF, VF, float, wf, true>;
  k.jacobi[3] = &eigh_jacobi_group<OpsD, VD, double, wd, true>;
  k.tridiag[0] = &eigh_tridiag_group<OpsF, VF, float, wf>;
  k.tridiag[1] = &eigh_tridiag_group<OpsD, VD, double, wd>;
  return k;
}

}  // namespace
}  // namespace tensord
