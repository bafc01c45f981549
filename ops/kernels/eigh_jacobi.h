// The arithmetic of a Jacobi eigenvalue rotation, once, for every caller:
// the CPU batched solver (V = a SIMD vector of matrices, one per lane), the
// scalar fallback (V = a narrow vector) and device code (V = float/double).
//
// `Ops` supplies what plain operators cannot for every V:
//   static V sqrt(V), static V abs(V),
//   static V select(mask, V a, V b)   (mask ? a : b, lane-wise),
//   static auto is_zero(V), static auto is_negative(V)   (lane masks),
// and `a < b` giving a lane mask select() takes.
#pragma once

#include "ops/kernels/common.h"

namespace tensord::kernels {

// The rotation J = [[c, s], [-s, c]] (in the (p, q) plane, A' = J^T A J)
// that annihilates the off-diagonal of the real symmetric 2x2
// [[app, apq], [apq, aqq]]. Rutishauser's smaller root of
// t^2 + 2 t theta - 1 = 0, theta = (aqq - app) / (2 apq), written without
// theta (which overflows for tiny apq):
//   d = aqq - app,  t = 2 apq sign(d) / (|d| + sqrt(d^2 + 4 apq^2)),
//   c = 1 / sqrt(1 + t^2),  s = t c,   |t| <= 1 (an angle of at most pi/4).
// d and 2 apq are first divided by the larger of their magnitudes, so the
// squares neither overflow nor underflow (a flushed 4 apq^2 next to a tiny d
// would give a huge t). Where both are below `tiny` (min_normal / eps on an
// input scaled to max |a| ~ 1) t = 0: the identity. d = 0 gives
// t = sign(apq), a quarter turn.
// Afterwards app' = app - t apq, aqq' = aqq + t apq, apq' = 0.
template <class Ops, class V, class R>
TENSORD_INLINE void jacobi_rotation(V app, V aqq, V apq, V& c, V& s, V& t) {
  const R tiny = sizeof(R) == 4 ? R(1e-31) : R(1e-291);
  const V d = aqq - app;
  const V two_apq = apq * R(2);
  const V ad = Ops::abs(d), aa = Ops::abs(two_apq);
  const V big = Ops::select(ad < aa, aa, ad);
  const auto none = big < tiny;
  const V inv = R(1) / Ops::select(none, big + R(1), big);
  const V dn = ad * inv;
  const V an = Ops::select(none, big * R(0), two_apq * inv);
  const V root = Ops::sqrt(dn * dn + an * an);  // in [1, sqrt 2], or 0 where none
  const V den = Ops::select(none, root + R(1), dn + root);
  const V num = Ops::select(Ops::is_negative(d), -an, an);
  t = num / den;
  c = R(1) / Ops::sqrt(t * t + R(1));
  s = t * c;
}

// Applies the rotation to a pair of entries (x, y) = (m_rp, m_rq) of
// columns p and q: (x, y) <- (c x - s y, s x + c y). Used for A's columns
// (hence, by symmetry, its rows) and for the eigenvector columns V J.
template <class V>
TENSORD_INLINE void jacobi_apply(V c, V s, V& x, V& y) {
  const V nx = c * x - s * y;
  const V ny = s * x + c * y;
  x = nx;
  y = ny;
}

// Complex Hermitian: with apq = m u (m = |apq|, |u| = 1), U = diag(1, conj u) J
// makes U^H A U's (p, q) entry zero, where J is the real rotation for
// [[app, m], [m, aqq]]. Column entries (x, y) = (a_rp, a_rq) become
//   (c x - s conj(u) y,  s x + c conj(u) y)
// (split into real and imaginary parts here), the eigenvector columns the
// same (V U), and app' = app - t m, aqq' = aqq + t m.
template <class V>
TENSORD_INLINE void jacobi_apply_complex(V c, V s, V ur, V ui, V& xr, V& xi, V& yr, V& yi) {
  // w = conj(u) y
  const V wr = ur * yr + ui * yi;
  const V wi = ur * yi - ui * yr;
  const V nxr = c * xr - s * wr, nxi = c * xi - s * wi;
  const V nyr = s * xr + c * wr, nyi = s * xi + c * wi;
  xr = nxr;
  xi = nxi;
  yr = nyr;
  yi = nyi;
}

// The entries in the conjugated position (row p instead of column p), used
// where only one triangle is stored: conj of the results above, i.e. with
// (x, y) = (a_pr, a_qr) = conj(a_rp, a_rq):
//   (c x - s u y,  s x + c u y).
template <class V>
TENSORD_INLINE void jacobi_apply_complex_conj(V c, V s, V ur, V ui, V& xr, V& xi, V& yr, V& yi) {
  // w = u y
  const V wr = ur * yr - ui * yi;
  const V wi = ur * yi + ui * yr;
  const V nxr = c * xr - s * wr, nxi = c * xi - s * wi;
  const V nyr = s * xr + c * wr, nyi = s * xi + c * wi;
  xr = nxr;
  xi = nxi;
  yr = nyr;
  yi = nyi;
}

}  // namespace tensord::kernels
