// The batched tridiagonal QL eigensolver for real symmetric matrices, SIMD
// across matrices (one per lane, the layout of eigh_jacobi_impl.h). Included
// only by the per-ISA translation units, through eigh_isa_table.h; the same
// rules as eigh_jacobi_impl.h (anonymous namespace, no standard-library
// inline code). The arithmetic is in ops/kernels/eigh_tridiag.h.
//
// 1. reduce(): Householder reduction of the packed lower triangle to
//    tridiagonal T = Q^T A Q (d diagonal, e off-diagonal), LAPACK sytd2's
//    column order; v_k is kept in A's column k.
// 2. form_q(): Z = Q = H_0 .. H_{n-3}, accumulated backwards (orgtr).
// 3. ql(): implicit QL with shifts on (d, e) (tqli), each step's rotation
//    also applied to Z's columns: Z ends as the eigenvectors.
// All lanes run the same loops: each group sweep runs over the union of
// the lanes' unreduced blocks [l, m] (each lane with its own l and m);
// lanes outside theirs get the identity (Ops::select), so every lane
// computes exactly what a one-matrix tqli would, whatever the group (up to
// the sign of a zero).
//
// Memory traffic per group: about n^3 / 2 vector stores for 1. and 2., and
// one store per Z element per QL sweep (the sweep's rotations are chained
// along each Z row, the carried element held in a register), about 1.3 n^3
// in all, against the cyclic Jacobi's ~20 n^3. The rotations of
// kEighTridiagSweepsPerPass sweeps are recorded and applied in one pass
// over Z, a few rows at a time, so those rows stay in L1/L2 across the
// sweeps (Z is 4 MiB at n = 256 on AVX-512). The phases are kept out of
// line (noinline): each is large, and profiles then name them.
#pragma once

#include <cstdint>

#include "ops/cpu/eigh_batched.h"
#include "ops/cpu/eigh_group_io.h"
#include "ops/kernels/eigh_tridiag.h"

namespace tensord {
namespace {

template <class Ops, class V, class R, int W>
struct TridiagGroup {
  static constexpr int kBlock = sizeof(V) >= 64 ? 8 : 4;  // Z rows / columns held in registers
  static constexpr int kMaxIter = 60;                     // QL iterations per eigenvalue (tqli: 30)

  int n;
  V* a;                     // packed lower triangle by rows; after reduce(), v_k below row k+1 of column k
  V* z;                     // n x n row-major: Q, then the eigenvectors as columns
  V *d, *e, *tau, *hv, *y;  // n vectors each
  V* rot;                   // kSweeps recorded sweeps: n cosines, n sines each
  int64_t sweep_l[kEighTridiagSweepsPerPass], sweep_m[kEighTridiagSweepsPerPass];
  int sweeps = 0;  // recorded, not yet applied
  R scale[W];

  static constexpr int kSweeps = kEighTridiagSweepsPerPass;
  V* rc(int k) { return rot + 2 * k * n; }
  V* rs(int k) { return rot + (2 * k + 1) * n; }

  static int64_t tri(int64_t i) { return i * (i + 1) / 2; }
  V& at(int64_t i, int64_t j) { return a[tri(i) + j]; }  // i >= j
  static V splat(R x) { return V{} + x; }

  __attribute__((noinline)) void reduce() {
    const V zero = splat(R(0));
    for (int64_t k = 0; k + 2 < n; ++k) {
      V sigma = zero;
      for (int64_t i = k + 2; i < n; ++i) sigma += at(i, k) * at(i, k);
      V beta, t, vs;
      kernels::householder_reflector<Ops, V, R>(at(k + 1, k), sigma, beta, t, vs);
      d[k] = at(k, k);
      e[k] = beta;
      tau[k] = t;
      hv[k + 1] = splat(R(1));
      for (int64_t i = k + 2; i < n; ++i) {
        const V v = at(i, k) * vs;
        at(i, k) = v;
        hv[i] = v;
      }
      // y = tau A22 v over rows / columns k+1 .. n-1 of the lower triangle.
      for (int64_t i = k + 1; i < n; ++i) y[i] = zero;
      for (int64_t i = k + 1; i < n; ++i) {
        const V vi = hv[i];
        V* row = a + tri(i);
        V acc = row[i] * vi;
        for (int64_t j = k + 1; j < i; ++j) {
          acc += row[j] * hv[j];
          y[j] += row[j] * vi;
        }
        y[i] += acc;
      }
      V dot = zero;
      for (int64_t i = k + 1; i < n; ++i) {
        y[i] *= t;
        dot += y[i] * hv[i];
      }
      // w = y - (tau / 2)(y . v) v; A22 -= v w^T + w v^T.
      const V half = t * dot * R(0.5);
      for (int64_t i = k + 1; i < n; ++i) y[i] -= half * hv[i];
      for (int64_t i = k + 1; i < n; ++i) {
        V* row = a + tri(i);
        const V vi = hv[i], wi = y[i];
        for (int64_t j = k + 1; j <= i; ++j) row[j] -= vi * y[j] + wi * hv[j];
      }
    }
    if (n >= 2) {
      d[n - 2] = at(n - 2, n - 2);
      e[n - 2] = at(n - 1, n - 2);
    }
    d[n - 1] = at(n - 1, n - 1);
    e[n - 1] = zero;
  }

  // Z[k1.., c0 .. c0+NB) -= tau v (v^T Z[k1.., c0 .. c0+NB)), the columns'
  // dot products held in registers. (Looping column blocks outermost, each
  // through all reflectors, measured 8% slower at n = 64..128 and no faster
  // at 256.)
  template <int NB>
  void reflect_cols(int64_t k1, int64_t c0, V t) {
    V u[NB];
    for (int b = 0; b < NB; ++b) u[b] = splat(R(0));
    for (int64_t r = k1; r < n; ++r) {
      const V vr = hv[r];
      const V* zr = z + r * n + c0;
      for (int b = 0; b < NB; ++b) u[b] += vr * zr[b];
    }
    for (int b = 0; b < NB; ++b) u[b] *= t;
    for (int64_t r = k1; r < n; ++r) {
      const V vr = hv[r];
      V* zr = z + r * n + c0;
      for (int b = 0; b < NB; ++b) zr[b] -= vr * u[b];
    }
  }

  // Z = Q = H_0 H_1 .. H_{n-3} (v_k in A's column k below row k+1),
  // accumulated backwards: step k touches only Z[k+1.., k+1..].
  __attribute__((noinline)) void form_q() {
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < n; ++c) z[r * n + c] = splat(r == c ? R(1) : R(0));
    }
    for (int64_t k = n - 3; k >= 0; --k) {
      const int64_t k1 = k + 1;
      hv[k1] = splat(R(1));
      for (int64_t i = k + 2; i < n; ++i) hv[i] = at(i, k);
      const V t = tau[k];
      int64_t c0 = k1;
      for (; c0 + kBlock <= n; c0 += kBlock) reflect_cols<kBlock>(k1, c0, t);
      for (; c0 < n; ++c0) reflect_cols<1>(k1, c0, t);
    }
  }

  // Recorded sweep k's rotations (cosines rc(k)[i], sines rs(k)[i], i =
  // m-1 down to l) applied to rows r0 .. r0+NB of Z, chained: the element
  // the next rotation pairs with stays in a register, so each element is
  // loaded and stored once.
  template <int NB>
  void rotate_rows(int64_t r0, int k) {
    const int64_t l = sweep_l[k], m = sweep_m[k];
    const V* cs = rc(k);
    const V* sn = rs(k);
    V x[NB];
    for (int b = 0; b < NB; ++b) x[b] = z[(r0 + b) * n + m];
    for (int64_t i = m - 1; i >= l; --i) {
      const V c = cs[i], s = sn[i];
      for (int b = 0; b < NB; ++b) {
        V* zr = z + (r0 + b) * n;
        V zi = zr[i];
        kernels::ql_rotate(c, s, zi, x[b]);
        zr[i + 1] = x[b];
        x[b] = zi;
      }
    }
    for (int b = 0; b < NB; ++b) z[(r0 + b) * n + l] = x[b];
  }

  // Applies the recorded sweeps, in order, to every row of Z (rows are
  // independent: the same result as sweep by sweep).
  __attribute__((noinline)) void flush_rotations() {
    int64_t r0 = 0;
    for (; r0 + kBlock <= n; r0 += kBlock) {
      for (int k = 0; k < sweeps; ++k) rotate_rows<kBlock>(r0, k);
    }
    for (; r0 < n; ++r0) {
      for (int k = 0; k < sweeps; ++k) rotate_rows<1>(r0, k);
    }
    sweeps = 0;
  }

  // Per lane, the first index in [lo, hi] (an integer-valued vector)
  // where `x` equals `at`, looked up by masks: returns x[at].
  V gather(const V* x, V at, int64_t lo, int64_t hi) const {
    V r = splat(R(0));
    for (int64_t i = lo; i <= hi; ++i) r = Ops::select(splat(R(i)) == at, x[i], r);
    return r;
  }

  // The implicit QL iteration (tqli) on (d, e), lane-masked (see the top).
  // Each lane keeps its own l (the first eigenvalue it has not found yet):
  // a lane never waits for the others, and a group sweep runs over the
  // union of the lanes' blocks [l, m]. False when some eigenvalue needed
  // more than kMaxIter iterations.
  __attribute__((noinline)) bool ql(bool vectors) {
    using K = kernels::TridiagConst<R>;
    const V zero = splat(R(0)), one = splat(R(1)), last = splat(R(n - 1));
    V lv = zero;     // per lane: l
    V iters = zero;  // per lane: QL iterations spent on l
    // e_i is negligible below u (|d_i| + |d_i+1|) (LAPACK's relative test)
    // or below 1e-3 u ||T||_F. The absolute floor matters for graded
    // matrices: a chase through entries near the underflow threshold has
    // its p, s underflow to 0 and changes nothing (seen: 2^-(i+j)-graded,
    // n = 64, float32), and it costs at most 1e-3 u ||A|| per deflation.
    V tsq = zero;
    for (int64_t i = 0; i < n; ++i) tsq += d[i] * d[i] + R(2) * e[i] * e[i];
    const V floor = Ops::sqrt(tsq) * (R(1e-3) * K::kRoundoff) + K::kTiny;
    for (;;) {
      // Per lane, m: the first i >= l with a negligible e_i (e_{n-1} = 0);
      // a lane whose e_l is negligible has found eigenvalue l and moves on.
      V mv;
      int64_t l_min;
      for (;;) {
        l_min = n - 1;
        for (int ln = 0; ln < W; ++ln) l_min = static_cast<int64_t>(lv[ln]) < l_min ? lv[ln] : l_min;
        mv = lv;
        auto found = lv >= last;
        for (int64_t i = l_min; i + 1 < n; ++i) {
          const V iv = splat(R(i));
          const V dd = Ops::abs(d[i]) + Ops::abs(d[i + 1]);
          const auto hit = (Ops::abs(e[i]) <= dd * K::kRoundoff + floor) & ~found & (iv >= lv);
          mv = Ops::select(hit, iv, mv);
          found |= hit;
        }
        mv = Ops::select(found, mv, last);
        const auto adv = (mv == lv) & (lv < last);
        bool any = false;
        for (int ln = 0; ln < W; ++ln) any = any || adv[ln];
        if (!any) break;
        lv = Ops::select(adv, lv + R(1), lv);
        iters = Ops::select(adv, zero, iters);
      }
      const auto active = mv != lv;
      int64_t m_max = -1;
      l_min = n;
      for (int ln = 0; ln < W; ++ln) {
        if (!active[ln]) continue;
        m_max = static_cast<int64_t>(mv[ln]) > m_max ? static_cast<int64_t>(mv[ln]) : m_max;
        l_min = static_cast<int64_t>(lv[ln]) < l_min ? static_cast<int64_t>(lv[ln]) : l_min;
      }
      if (m_max < 0) break;
      iters = Ops::select(active, iters + R(1), iters);
      for (int ln = 0; ln < W; ++ln) {
        if (iters[ln] > R(kMaxIter)) return false;
      }
      const V shift = kernels::ql_shift<Ops, V, R>(gather(d, lv, l_min, m_max), gather(d, lv + R(1), l_min + 1, m_max),
                                                   gather(e, lv, l_min, m_max));
      V s = one, c = one, p = zero, g = zero;
      V* const cs = rc(sweeps);
      V* const sn = rs(sweeps);
      auto live = active;
      for (int64_t i = m_max - 1; i >= l_min; --i) {
        const V iv = splat(R(i));
        const auto in = live & (iv < mv) & (iv >= lv);
        const auto first = in & (iv == mv - R(1));
        g = Ops::select(first, d[i + 1] - shift, g);
        V s1 = s, c1 = c, p1 = p, g1 = g, di1;
        const V r = kernels::ql_step<Ops, V, R>(d[i], d[i + 1], e[i], s1, c1, p1, g1, di1);
        const auto zr = in & (r == zero);
        const auto up = in & ~zr;
        d[i + 1] = Ops::select(up, di1, Ops::select(zr, d[i + 1] - p, d[i + 1]));
        // tqli sets e_{i+1} = r, and e_m = 0 once the chase is over (also
        // when it ends early): e_m is not read again in this sweep.
        e[i + 1] = Ops::select(first, zero, Ops::select(up, r, e[i + 1]));
        s = Ops::select(up, s1, s);
        c = Ops::select(up, c1, c);
        p = Ops::select(up, p1, p);
        g = Ops::select(up, g1, g);
        cs[i] = Ops::select(up, c1, one);
        sn[i] = Ops::select(up, s1, zero);
        live &= ~zr;
        // The lane's last step (i = l): d_l -= p, e_l = g.
        const auto fin = up & (iv == lv);
        d[i] = Ops::select(fin, d[i] - p, d[i]);
        e[i] = Ops::select(fin, g, e[i]);
      }
      if (vectors) {
        sweep_l[sweeps] = l_min;
        sweep_m[sweeps] = m_max;
        if (++sweeps == kSweeps) flush_rotations();
      }
    }
    if (vectors) flush_rotations();
    return true;
  }

  // Eigenvalues ascending (a stable insertion sort per lane) and the
  // matching eigenvector columns, unscaled, into the row-major outputs.
  // `order` holds W * n ints. Z is read row by row (a row stays in L1 while
  // every lane's row r is written).
  __attribute__((noinline)) void store(int64_t count, R* w_out, R* v_out, int* order) const {
    const R* dp = reinterpret_cast<const R*>(d);
    const R* zp = reinterpret_cast<const R*>(z);
    for (int64_t l = 0; l < count; ++l) {
      R* w = w_out + l * n;
      int* ord = order + l * n;
      for (int64_t k = 0; k < n; ++k) {
        const R x = dp[k * W + l] / scale[l];
        int64_t j = k;
        for (; j > 0 && w[j - 1] > x; --j) {
          w[j] = w[j - 1];
          ord[j] = ord[j - 1];
        }
        w[j] = x;
        ord[j] = static_cast<int>(k);
      }
    }
    if (!v_out) return;
    for (int64_t r = 0; r < n; ++r) {
      const R* zr = zp + r * n * W;
      for (int64_t l = 0; l < count; ++l) {
        const int* ord = order + l * n;
        R* v = v_out + (l * n + r) * n;
        for (int64_t j = 0; j < n; ++j) v[j] = zr[static_cast<int64_t>(ord[j]) * W + l];
      }
    }
  }
};

// Workspace (eigh_batched.cpp sizes it): tri(n) + n^2 + (5 + 2 kSweeps) n
// vectors, W n ints.
template <class Ops, class V, class R, int W>
int eigh_tridiag_group(const EighGroupArgs& g, int64_t* bad) {
  TridiagGroup<Ops, V, R, W> t;
  const int64_t n = g.n;
  t.n = g.n;
  t.a = static_cast<V*>(g.work);
  t.z = t.a + n * (n + 1) / 2;
  t.d = t.z + n * n;
  t.e = t.d + n;
  t.tau = t.e + n;
  t.hv = t.tau + n;
  t.y = t.hv + n;
  t.rot = t.y + n;
  int* order = reinterpret_cast<int*>(t.rot + 2 * t.kSweeps * n);
  const int64_t b =
      load_packed_lower<R, W, 1>(static_cast<const R*>(g.in), g.count, n, g.lower, reinterpret_cast<R*>(t.a), t.scale);
  if (b >= 0) {
    *bad = b;
    return kEighNonFinite;
  }
  const bool vectors = g.v != nullptr;
  t.reduce();
  if (vectors) t.form_q();
  if (!t.ql(vectors)) {
    *bad = 0;
    return kEighNoConvergence;
  }
  t.store(g.count, static_cast<R*>(g.w), static_cast<R*>(g.v), order);
  return kEighOk;
}

}  // namespace
}  // namespace tensord
