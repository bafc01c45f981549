// The arithmetic of the tridiagonal eigensolver (Householder reduction to
// tridiagonal form, then implicit QL with Wilkinson-type shifts, as in
// EISPACK's tql2 / Numerical Recipes' tqli), once, for every caller: the CPU
// batched solver (V = a SIMD vector, one matrix per lane), the portable
// fallback and device code (V = float/double). `Ops` is as in
// eigh_jacobi.h (sqrt, abs, select, is_negative; `a < b` a lane mask).
//
// Every formula here is branch-free: lanes that must skip a step get a mask
// from the caller (or from these functions) and keep their old values
// through Ops::select. Inputs are assumed scaled so that max |a_ij| ~ 1 (the
// callers multiply each matrix by a power of two first), which is what the
// absolute thresholds below are relative to.
#pragma once

#include "ops/kernels/common.h"

namespace tensord::kernels {

template <class R>
struct TridiagConst {
  // Below this a sum of squares has lost bits to underflow: such a
  // Householder column (|x| < 1e-18 resp. 1e-150 on a unit-scaled matrix)
  // is dropped (the identity), an error far below a rounding of ||A||.
  static constexpr R kTinySq = sizeof(R) == 4 ? R(1e-36) : R(1e-300);
  // A rotation whose (f, g) are both below this is taken as r = 0 (tqli's
  // underflow exit); between it and kLo, f and g are scaled by kUp first.
  static constexpr R kTiny = sizeof(R) == 4 ? R(1e-30) : R(1e-290);
  static constexpr R kLo = sizeof(R) == 4 ? R(8.8817841970012523e-16) : R(3.8725919148493183e-121);  // 2^-50, 2^-400
  static constexpr R kUp = sizeof(R) == 4 ? R(1152921504606846976.0) : R(3.273390607896142e150);     // 2^60, 2^500
  // The unit roundoff: an off-diagonal e_m is negligible when
  // |e_m| <= u (|d_m| + |d_m+1|) + 1e-3 u ||T||_F (+ kTiny).
  static constexpr R kRoundoff = sizeof(R) == 4 ? R(5.9604644775390625e-08) : R(1.1102230246251565e-16);
};

// The Householder reflector H = I - tau v v^T with v = (1, x1 * vscale)
// and H (alpha, x1) = (beta, 0), given alpha and sigma = |x1|^2 (LAPACK's
// larfg without its rescaling loop): beta = -sign(alpha) sqrt(alpha^2 +
// sigma), tau = (beta - alpha) / beta, vscale = 1 / (alpha - beta).
// sigma below kTinySq: tau = 0, vscale = 0, beta = alpha (the identity).
template <class Ops, class V, class R>
TENSORD_INLINE void householder_reflector(V alpha, V sigma, V& beta, V& tau, V& vscale) {
  const V zero = alpha * R(0);
  const auto skip = sigma < TridiagConst<R>::kTinySq;
  const V mu = Ops::sqrt(alpha * alpha + sigma);
  const V b = Ops::select(Ops::is_negative(alpha), mu, zero - mu);
  const V den = alpha - b;  // alpha + sign(alpha) mu: no cancellation
  beta = Ops::select(skip, alpha, b);
  tau = Ops::select(skip, zero, (b - alpha) / Ops::select(skip, zero + R(1), b));
  vscale = Ops::select(skip, zero, R(1) / Ops::select(skip, zero + R(1), den));
}

// Givens: c = g / r, s = f / r, r = hypot(f, g) without losing bits to
// underflow (both below kLo: scaled by kUp, exact). Both below kTiny: r = 0
// (and c, s are not meaningful; the caller treats r = 0 lanes separately).
template <class Ops, class V, class R>
TENSORD_INLINE void givens(V f, V g, V& c, V& s, V& r) {
  using K = TridiagConst<R>;
  const V af = Ops::abs(f), ag = Ops::abs(g);
  const V big = Ops::select(af < ag, ag, af);
  const V one = f * R(0) + R(1);
  const auto small = big < K::kLo;
  const auto none = big < K::kTiny;
  // The plain and the scaled hypot side by side, then a select: the
  // magnitude test stays off the QL chase's dependency chain. (A 14-bit
  // rsqrt estimate and a Newton step in place of sqrt and the division
  // measured no faster: the chase is not bound by their latency alone.)
  const V fs = f * K::kUp, gs = g * K::kUp;
  const V r1 = Ops::sqrt(f * f + g * g);
  const V r2 = Ops::sqrt(fs * fs + gs * gs);
  const V rs = Ops::select(small, r2, r1);
  const V inv = R(1) / Ops::select(none, one, rs);
  c = Ops::select(small, gs, g) * inv;
  s = Ops::select(small, fs, f) * inv;
  r = Ops::select(none, one * R(0), Ops::select(small, r2 * (R(1) / K::kUp), r1));
}

// The shift of a QL iteration on the block starting at l (Wilkinson's, in
// tqli's form): the first value g of the chase is d_m - ql_shift(...),
// ql_shift = d_l - e_l / (t + sign(t) sqrt(t^2 + 1)), t = (d_l+1 - d_l) / (2 e_l).
// e_l is not negligible where this is used (so not 0); a t^2 that
// overflows gives e_l / inf = 0, the right limit.
template <class Ops, class V, class R>
TENSORD_INLINE V ql_shift(V d_l, V d_l1, V e_l) {
  const V t = (d_l1 - d_l) / (e_l * R(2));
  const V r = Ops::sqrt(t * t + R(1));
  return d_l - e_l / (t + Ops::select(Ops::is_negative(t), V(r * R(-1)), r));
}

// One step i of the implicit QL chase (i from m-1 down to l), tqli's loop
// body: with the chase state (s, c, p, g) from step i+1 (s = c = 1, p = 0,
// g = d_m - shift before the first), computes the rotation (c, s) in the
// plane (i, i+1), the new e_{i+1} (= r) and d_{i+1}, and the new state.
// Returns r; r = 0 (underflow) means the caller ends this lane's chase with
// d_{i+1} -= p (old p) instead, and leaves the rest unchanged.
template <class Ops, class V, class R>
TENSORD_INLINE V ql_step(V d_i, V d_i1, V e_i, V& s, V& c, V& p, V& g, V& d_i1_out) {
  const V f = s * e_i;
  const V b = c * e_i;
  V r;
  givens<Ops, V, R>(f, g, c, s, r);
  const V gg = d_i1 - p;
  const V rr = (d_i - gg) * s + R(2) * c * b;
  p = s * rr;
  d_i1_out = gg + p;
  g = c * rr - b;
  return r;
}

// Applies the rotation of step i to an eigenvector row's pair
// (x, y) = (z_i, z_{i+1}): (x, y) <- (c x - s y, s x + c y).
template <class V>
TENSORD_INLINE void ql_rotate(V c, V s, V& x, V& y) {
  const V nx = c * x - s * y;
  const V ny = s * x + c * y;
  x = nx;
  y = ny;
}

}  // namespace tensord::kernels
