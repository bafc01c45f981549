// The batched cyclic Jacobi eigensolver, SIMD across matrices. Included
// only by the per-ISA translation units (eigh_jacobi_{portable,avx2,avx512}
// .cpp), each of which first defines, in an anonymous namespace:
//   using VF = <float vector type>, VD = <double vector type>;
//   struct OpsF / OpsD { sqrt, abs, select, is_zero, is_negative } (see
//   ops/kernels/eigh_jacobi.h);
// and then instantiates eigh_jacobi_group<...> (make_kernels). Everything here lives in an
// anonymous namespace and uses no standard-library inline code, so code
// compiled for AVX-512 can never be merged (ODR/COMDAT) into a path that
// must run on a plain x86-64 CPU.
//
// Layout of one group of W matrices (lane l = matrix l, structure of arrays:
// the same element of the W matrices is one vector):
//   A: the lower triangle, packed by rows: element (i, j), i >= j, at
//      i (i + 1) / 2 + j; complex entries as a (re, im) pair of vectors.
//   VT: the eigenvector matrix transposed (row k = eigenvector column k), so
//      a rotation updates two contiguous rows.
// A sweep rotates every (p, q), p < q, in row-cyclic order. Before each sweep
// the off-diagonal mass off(A)^2 = 2 sum_{i>j} |a_ij|^2 is compared with
// tol^2 ||A||_F^2 (||A||_F is invariant under the rotations); the group stops
// when every lane is below. The residual ||A V - V diag(w)|| is then about
// off(A), and Jacobi converges quadratically, so ~log2(n) + 4 sweeps suffice.
// Each input matrix is first scaled by a power of two (exact) so that its
// largest entry is in [0.5, 1): no overflow in d^2 + 4 apq^2, no underflow
// of small matrices' off-diagonal mass.
#pragma once

#include <cstdint>

#include "ops/cpu/eigh_batched.h"
#include "ops/cpu/eigh_group_io.h"
#include "ops/kernels/eigh_jacobi.h"

namespace tensord {
namespace {

template <class Ops, class V, class R, int W, bool kCplx>
struct JacobiGroup {
  static constexpr int kP = kCplx ? 2 : 1;  // planes per element: re (, im)

  int n;
  int64_t tri_n;           // n (n + 1) / 2
  V* a;                    // tri_n * kP vectors
  V* vt;                   // n * n * kP vectors
  V *rc, *rs, *rur, *rui;  // n vectors each: round p's rotations, by q
  V** rows;                // n row pointers for fused()
  R scale[W];              // per lane: the power of two the input was multiplied by

  static int64_t tri(int64_t i) { return i * (i + 1) / 2; }
  V& ar(int64_t e) { return a[e * kP]; }
  V& ai(int64_t e) { return a[e * kP + 1]; }

  // Loads `count` matrices (lanes beyond are zero matrices) and V = I;
  // returns the index of a matrix with a non-finite entry in its triangle, or -1.
  int64_t load(const R* in, int64_t count, bool lower) {
    const int64_t nn = static_cast<int64_t>(n) * n;
    R* vp = reinterpret_cast<R*>(vt);
    for (int64_t e = 0; e < nn * kP * W; ++e) vp[e] = R(0);
    for (int64_t k = 0; k < n; ++k) {
      for (int l = 0; l < W; ++l) vp[(k * n + k) * kP * W + l] = R(1);
    }
    return load_packed_lower<R, W, kP>(in, count, n, lower, reinterpret_cast<R*>(a), scale);
  }

  // Per lane: the squared Frobenius norm (all) and the off-diagonal part.
  void norms(V& all, V& off) {
    V d = V{} + R(0), o = V{} + R(0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = tri(i);
      for (int64_t j = 0; j < i; ++j) {
        o += ar(row + j) * ar(row + j);
        if constexpr (kCplx) o += ai(row + j) * ai(row + j);
      }
      d += ar(row + i) * ar(row + i);
    }
    off = o * R(2);
    all = d + off;
  }

  // Rotation (p, q): computes and records its parameters (rc/rs, and the
  // phase ur/ui for complex) in slot q, updates the 2x2 block and the
  // entries of columns p and q that later rotations of this round read
  // (rows r > p). The rows r < p of the pair and the eigenvector rows are
  // left to finish_round, which applies all of p's rotations in one pass.
  void rotate(int64_t p, int64_t q) {
    const int64_t tp = tri(p), tq = tri(q);
    V& app = ar(tp + p);
    V& aqq = ar(tq + q);
    V c, s, t;
    if constexpr (!kCplx) {
      V& apq = ar(tq + p);
      kernels::jacobi_rotation<Ops, V, R>(app, aqq, apq, c, s, t);
      app -= t * apq;
      aqq += t * apq;
      apq = V{} + R(0);
      for (int64_t r = p + 1; r < q; ++r) kernels::jacobi_apply(c, s, ar(tri(r) + p), ar(tq + r));
      for (int64_t r = q + 1, tr = tri(q + 1); r < n; tr += r + 1, ++r)
        kernels::jacobi_apply(c, s, ar(tr + p), ar(tr + q));
    } else {
      // a_pq = conj(stored (q, p)) = m u.
      const V gr = ar(tq + p), gi = -ai(tq + p);
      // |a_pq| and u = a_pq / |a_pq| through the larger part, so that the
      // squares never go subnormal (a subnormal |a_pq|^2 has too few bits
      // for u to have modulus 1, and the transform would stop being unitary).
      const V agr = Ops::abs(gr), agi = Ops::abs(gi);
      const V big = Ops::select(agr < agi, agi, agr);
      // Below min_normal / eps (the matrix is scaled to max |a| ~ 1) a_pq is
      // taken as 0 (as in jacobi_rotation): its reciprocal would overflow,
      // and zeroing it changes the matrix by far less than a rounding error.
      const R tiny = sizeof(R) == 4 ? R(1e-31) : R(1e-291);
      const auto zero = big < tiny;
      const V inv_big = R(1) / Ops::select(zero, big + R(1), big);
      const V hr = gr * inv_big, hi = gi * inv_big;  // the larger is +-1
      const V h0 = Ops::sqrt(hr * hr + hi * hi);     // in [1, sqrt 2], or 0
      const V h = Ops::select(zero, h0 + R(1), h0);  // a_pq = 0: 1
      const V m = big * h;
      const V inv_h = R(1) / h;
      const V ur = Ops::select(zero, h, hr * inv_h);  // a_pq = 0: u = 1 (h = 1 there)
      const V ui = hi * inv_h;
      kernels::jacobi_rotation<Ops, V, R>(app, aqq, m, c, s, t);
      app -= t * m;
      aqq += t * m;
      ar(tq + p) = V{} + R(0);
      ai(tq + p) = V{} + R(0);
      for (int64_t r = p + 1; r < q; ++r) {
        const int64_t e = tri(r) + p;
        V yi = -ai(tq + r);
        kernels::jacobi_apply_complex(c, s, ur, ui, ar(e), ai(e), ar(tq + r), yi);
        ai(tq + r) = -yi;
      }
      for (int64_t r = q + 1, tr = tri(q + 1); r < n; tr += r + 1, ++r) {
        kernels::jacobi_apply_complex(c, s, ur, ui, ar(tr + p), ai(tr + p), ar(tr + q), ai(tr + q));
      }
      rur[q] = ur;
      rui[q] = ui;
    }
    rc[q] = c;
    rs[q] = s;
  }

  // Applies rotations (p, p+1) .. (p, n-1), in order, to the pairs
  // (x_r, y_qr) for r = 0 .. len-1: x = row p, y_q = row q of a strided
  // table (element (k, r) at base + k * row_stride + r * kP, in vectors).
  // No rotation of the round reads these entries, so doing them here, kB
  // columns at a time with x held in registers, gives the same result as
  // rotating them one by one, with half the loads and stores.
  template <bool kConj>
  void fused(int64_t p, V* xrow, V* const* yrows, int64_t len) {
    constexpr int kB = kCplx ? 4 : 8;
    for (int64_t r0 = 0; r0 < len; r0 += kB) {
      const int64_t nb = len - r0 < kB ? len - r0 : kB;
      V xr[kB], xi[kB];
      for (int64_t b = 0; b < nb; ++b) {
        xr[b] = xrow[(r0 + b) * kP];
        if constexpr (kCplx) xi[b] = xrow[(r0 + b) * kP + 1];
      }
      for (int64_t q = p + 1; q < n; ++q) {
        const V c = rc[q], s = rs[q];
        V* y = yrows[q] + r0 * kP;
        if constexpr (!kCplx) {
          for (int64_t b = 0; b < nb; ++b) kernels::jacobi_apply(c, s, xr[b], y[b]);
        } else {
          const V ur = rur[q], ui = rui[q];
          for (int64_t b = 0; b < nb; ++b) {
            if constexpr (kConj) {
              kernels::jacobi_apply_complex_conj(c, s, ur, ui, xr[b], xi[b], y[2 * b], y[2 * b + 1]);
            } else {
              kernels::jacobi_apply_complex(c, s, ur, ui, xr[b], xi[b], y[2 * b], y[2 * b + 1]);
            }
          }
        }
      }
      for (int64_t b = 0; b < nb; ++b) {
        xrow[(r0 + b) * kP] = xr[b];
        if constexpr (kCplx) xrow[(r0 + b) * kP + 1] = xi[b];
      }
    }
  }

  // The deferred part of round p: rows r < p of A's columns p, q (stored as
  // rows p and q of the lower triangle, conjugated) and the eigenvectors.
  void finish_round(int64_t p) {
    for (int64_t q = p + 1; q < n; ++q) rows[q] = a + tri(q) * kP;
    if (p > 0) fused<true>(p, a + tri(p) * kP, rows, p);
    for (int64_t q = p + 1; q < n; ++q) rows[q] = vt + q * n * kP;
    fused<false>(p, vt + p * n * kP, rows, n);
  }

  // Sweeps until every lane's off(A) <= tol ||A||_F; false after max_sweeps.
  bool solve(R tol, int max_sweeps) {
    V all, off;
    norms(all, off);
    const V limit = all * (tol * tol);
    for (int sweep = 0;; ++sweep) {
      bool done = true;
      for (int l = 0; l < W; ++l) done = done && off[l] <= limit[l];
      if (done) return true;
      if (sweep == max_sweeps) return false;
      for (int64_t p = 0; p + 1 < n; ++p) {
        for (int64_t q = p + 1; q < n; ++q) rotate(p, q);
        finish_round(p);
      }
      norms(all, off);
    }
  }

  // Eigenvalues ascending (a stable insertion sort of the diagonal) and the
  // matching eigenvector columns, unscaled, into the row-major outputs.
  void store(int64_t count, R* w_out, R* v_out, int* order) const {
    const R* ap = reinterpret_cast<const R*>(a);
    const R* vp = reinterpret_cast<const R*>(vt);
    for (int64_t l = 0; l < count; ++l) {
      R* w = w_out + l * n;
      for (int64_t k = 0; k < n; ++k) {
        const R x = ap[(tri(k) + k) * kP * W + l] / scale[l];
        int64_t j = k;
        for (; j > 0 && w[j - 1] > x; --j) {
          w[j] = w[j - 1];
          order[j] = order[j - 1];
        }
        w[j] = x;
        order[j] = static_cast<int>(k);
      }
      if (!v_out) continue;
      R* v = v_out + l * n * n * kP;
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          const int64_t src = (static_cast<int64_t>(order[j]) * n + r) * kP * W + l;
          v[(r * n + j) * kP] = vp[src];
          if constexpr (kCplx) v[(r * n + j) * kP + 1] = vp[src + W];
        }
      }
    }
  }
};

template <class Ops, class V, class R, int W, bool kCplx>
int eigh_jacobi_group(const EighGroupArgs& g, int64_t* bad) {
  JacobiGroup<Ops, V, R, W, kCplx> j;
  j.n = g.n;
  j.tri_n = static_cast<int64_t>(g.n) * (g.n + 1) / 2;
  j.a = static_cast<V*>(g.work);
  j.vt = j.a + j.tri_n * j.kP;
  j.rc = j.vt + static_cast<int64_t>(g.n) * g.n * j.kP;
  j.rs = j.rc + g.n;
  j.rur = j.rs + g.n;
  j.rui = j.rur + g.n;
  j.rows = reinterpret_cast<V**>(j.rui + g.n);
  int* order = reinterpret_cast<int*>(j.rows + g.n);
  const int64_t b = j.load(static_cast<const R*>(g.in), g.count, g.lower);
  if (b >= 0) {
    *bad = b;
    return kEighNonFinite;
  }
  // Stop at off(A) <= eps sqrt(n) ||A||_F: the rounding floor of n^2
  // entries each perturbed by ~eps ||A|| / n. Random matrices get there in
  // ~log2(n) + 4 sweeps (quadratic convergence); clusters of (numerically)
  // equal eigenvalues converge only linearly (about 2x per sweep, measured
  // on 11-fold eigenvalues at n = 33 in float64), hence the generous cap.
  const R eps = sizeof(R) == 4 ? R(1.1920929e-07) : R(2.220446049250313e-16);
  const R tol = eps * static_cast<R>(__builtin_sqrt(static_cast<double>(g.n)));
  if (!j.solve(tol, sizeof(R) == 4 ? 40 : 80)) {
    *bad = 0;
    return kEighNoConvergence;
  }
  j.store(g.count, static_cast<R*>(g.w), static_cast<R*>(g.v), order);
  return kEighOk;
}

}  // namespace
}  // namespace tensord
