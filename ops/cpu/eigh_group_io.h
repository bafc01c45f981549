// Loading a group of W matrices into the batched eigensolvers' lane layout
// (structure of arrays: element e of the W matrices is one vector, lane l =
// matrix l), shared by the Jacobi (eigh_jacobi_impl.h) and tridiagonal QL
// (eigh_tridiag_impl.h) kernels. Included only by the per-ISA translation
// units; anonymous namespace and no standard-library inline code (see
// eigh_jacobi_impl.h).
#pragma once

#include <cstdint>

namespace tensord {
namespace {

// Packs the lower triangle of `count` row-major n x n matrices (kP = 1
// real, 2 complex: (re, im) planes) by rows into `ap` (element (i, j),
// i >= j, at i (i + 1) / 2 + j; lanes beyond `count` are zero), reading only
// the `lower` (else upper, conjugated) triangle. Each matrix is multiplied
// by a power of two (exact, recorded in scale[l]) that puts its largest
// entry in [0.5, 1). Returns the index of a matrix with a non-finite entry in
// its triangle (the diagonal's imaginary part is ignored), or -1.
template <class R, int W, int kP>
int64_t load_packed_lower(const R* in, int64_t count, int64_t n, bool lower, R* ap, R* scale) {
  const int64_t tri_n = n * (n + 1) / 2;
  const int64_t nn = n * n;
  for (int64_t e = 0; e < tri_n * kP * W; ++e) ap[e] = R(0);
  for (int l = 0; l < W; ++l) scale[l] = R(1);
  for (int64_t l = 0; l < count; ++l) {
    const R* m = in + l * nn * kP;
    R amax = R(0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        // (i, j) of the lower triangle: m[i][j], or conj(m[j][i]) from the upper.
        const int64_t src = (lower ? i * n + j : j * n + i) * kP;
        for (int c = 0; c < kP; ++c) {
          if (c == 1 && i == j) continue;  // a Hermitian diagonal is real: imaginary parts ignored
          const R x = m[src + c];
          if (!__builtin_isfinite(x)) return l;
          const R ax = x < R(0) ? -x : x;
          amax = ax > amax ? ax : amax;
        }
      }
    }
    int e = 0;
    if (amax > R(0)) __builtin_frexp(static_cast<double>(amax), &e);
    const R s = static_cast<R>(__builtin_ldexp(1.0, -e));
    scale[l] = s;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        const int64_t src = (lower ? i * n + j : j * n + i) * kP;
        const int64_t dst = ((i * (i + 1) / 2) + j) * kP * W + l;
        ap[dst] = m[src] * s;
        if constexpr (kP == 2) {
          const R im = i == j ? R(0) : m[src + 1] * s;
          ap[dst + W] = lower ? im : -im;
        }
      }
    }
  }
  return -1;
}

}  // namespace
}  // namespace tensord
