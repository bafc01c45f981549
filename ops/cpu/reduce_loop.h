// The CPU reduction engine. A reduction over any set of dims of a
// contiguous tensor is done as passes over [A, R, B] views: dims of size 1
// are dropped, neighbouring dims of the same kind (reduced / kept) merged,
// and each group of reduced dims is folded away in turn, innermost first.
//  - B == 1: each output folds a contiguous run, with 8 independent
//    accumulators so the compiler vectorises (and the sum is more accurate).
//  - B > 1: rows of B are folded column-wise into a chunk of accumulators.
// When there are too few outputs to keep the threads busy, R is cut into
// blocks whose partial results are combined in order; the cut depends on the
// shape only, so results do not depend on the number of threads.
//
// A policy P gives: Src (element read), Acc (accumulator), init(),
// map(Src) -> Acc (first pass only), combine(Acc, Acc) -> Acc.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "ops/op_registry.h"
#include "ops/shape.h"

namespace tensord::cpu {

inline constexpr int64_t kReduceTask = 32768;      // min elements per parallel task
inline constexpr int64_t kReduceCols = 1024;       // accumulators per column chunk
inline constexpr int64_t kReduceTargetTasks = 64;  // R is split until there are this many tasks

// (size, reduced) groups of a shape: size-1 dims dropped, same-kind
// neighbours merged.
inline std::vector<std::pair<int64_t, bool>> reduce_groups(const Shape& s, const std::vector<bool>& reduced) {
  std::vector<std::pair<int64_t, bool>> g;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == 1) continue;
    if (!g.empty() && g.back().second == reduced[i]) {
      g.back().first *= s[i];
    } else {
      g.emplace_back(s[i], reduced[i]);
    }
  }
  return g;
}

// Folds x[0..n) with 8 accumulators.
template <class P>
typename P::Acc reduce_contig(const P& p, const typename P::Src* x, int64_t n) {
  using Acc = typename P::Acc;
  constexpr int kLanes = 8;
  Acc a[kLanes];
  for (int j = 0; j < kLanes; ++j) a[j] = p.init();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) a[j] = p.combine(a[j], p.map(x[i + j]));
  }
  for (; i < n; ++i) a[0] = p.combine(a[0], p.map(x[i]));
  a[0] = p.combine(a[0], a[4]);
  a[1] = p.combine(a[1], a[5]);
  a[2] = p.combine(a[2], a[6]);
  a[3] = p.combine(a[3], a[7]);
  a[0] = p.combine(a[0], a[2]);
  a[1] = p.combine(a[1], a[3]);
  return p.combine(a[0], a[1]);
}

// Reduces x viewed as [A, R, B] over R into out[A, B].
template <class P>
void reduce_pass(const OpContext& ctx, const P& p, const typename P::Src* x, typename P::Acc* out, int64_t A, int64_t R,
                 int64_t B) {
  using Acc = typename P::Acc;
  using Src = typename P::Src;
  const int64_t bc = B == 1 ? 1 : std::min(B, kReduceCols);
  const int64_t nbc = (B + bc - 1) / bc;
  // Split R only as far as needed for kReduceTargetTasks tasks of at least
  // kReduceTask elements; the split depends on the shape alone.
  const int64_t finest = std::max<int64_t>(1, kReduceTask / bc);  // rows per task at most this fine
  const int64_t max_nrb = (R + finest - 1) / finest;
  const int64_t want_nrb = (kReduceTargetTasks + A * nbc - 1) / (A * nbc);
  int64_t nrb = std::clamp<int64_t>(want_nrb, 1, std::max<int64_t>(1, max_nrb));
  const int64_t rblk = (R + nrb - 1) / nrb;
  nrb = (R + rblk - 1) / rblk;

  // x[a, r0:r1, b0:b0+bn] -> dst[0:bn]
  auto block = [&](int64_t a, int64_t r0, int64_t r1, int64_t b0, int64_t bn, Acc* dst) {
    if (B == 1) {
      dst[0] = reduce_contig(p, x + a * R + r0, r1 - r0);
      return;
    }
    Acc acc[kReduceCols];
    for (int64_t b = 0; b < bn; ++b) acc[b] = p.init();
    int64_t r = r0;
    // Four rows at a time: four read streams keep the prefetchers busy.
    for (; r + 4 <= r1; r += 4) {
      const Src* q0 = x + (a * R + r) * B + b0;
      const Src* q1 = q0 + B;
      const Src* q2 = q1 + B;
      const Src* q3 = q2 + B;
      for (int64_t b = 0; b < bn; ++b) {
        acc[b] =
            p.combine(acc[b], p.combine(p.combine(p.map(q0[b]), p.map(q1[b])), p.combine(p.map(q2[b]), p.map(q3[b]))));
      }
    }
    for (; r < r1; ++r) {
      const Src* row = x + (a * R + r) * B + b0;
      for (int64_t b = 0; b < bn; ++b) acc[b] = p.combine(acc[b], p.map(row[b]));
    }
    std::copy(acc, acc + bn, dst);
  };

  if (nrb == 1) {
    const int64_t grain = std::max<int64_t>(1, kReduceTask / std::max<int64_t>(1, R * bc));
    ctx.parallel_for(A * nbc, grain, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t a = t / nbc, b0 = (t % nbc) * bc;
        block(a, 0, R, b0, std::min(bc, B - b0), out + a * B + b0);
      }
    });
    return;
  }
  std::vector<Acc> part(static_cast<size_t>(A * nrb * B));  // [A, nrb, B]
  ctx.parallel_for(A * nbc * nrb, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t a = t / (nbc * nrb), rem = t % (nbc * nrb);
      const int64_t b0 = (rem / nrb) * bc, rb = rem % nrb;
      const int64_t r0 = rb * rblk, r1 = std::min(R, r0 + rblk);
      block(a, r0, r1, b0, std::min(bc, B - b0), part.data() + (a * nrb + rb) * B + b0);
    }
  });
  // Combine the partials in block order, a contiguous chunk of B at a time.
  ctx.parallel_for(A * nbc, std::max<int64_t>(1, kReduceTask / (nrb * bc)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t a = t / nbc, b0 = (t % nbc) * bc, bn = std::min(bc, B - b0);
      Acc* o = out + a * B + b0;
      const Acc* src = part.data() + a * nrb * B + b0;
      std::copy(src, src + bn, o);
      for (int64_t rb = 1; rb < nrb; ++rb) {
        const Acc* q = src + rb * B;
        for (int64_t b = 0; b < bn; ++b) o[b] = p.combine(o[b], q[b]);
      }
    }
  });
}

// Policy for passes after the first: accumulators combine as they are.
template <class P>
struct CombineOnly {
  using Src = typename P::Acc;
  using Acc = typename P::Acc;
  const P& p;
  Acc init() const { return p.init(); }
  Acc map(Src v) const { return v; }
  Acc combine(Acc a, Acc b) const { return p.combine(a, b); }
};

// Reduces x (contiguous, `shape`, numel > 0) over the dims flagged in
// `reduced` into out (one Acc per output element, row-major over the kept
// dims).
template <class P>
void reduce_dims(const OpContext& ctx, const P& p, const typename P::Src* x, const Shape& shape,
                 const std::vector<bool>& reduced, typename P::Acc* out) {
  using Acc = typename P::Acc;
  auto g = reduce_groups(shape, reduced);
  auto last_reduced = [&]() -> int {
    for (int i = static_cast<int>(g.size()) - 1; i >= 0; --i) {
      if (g[static_cast<size_t>(i)].second) return i;
    }
    return -1;
  };
  auto view = [&](int j) {
    int64_t A = 1, B = 1;
    for (int i = 0; i < j; ++i) A *= g[static_cast<size_t>(i)].first;
    for (size_t i = static_cast<size_t>(j) + 1; i < g.size(); ++i) B *= g[i].first;
    return std::pair<int64_t, int64_t>(A, B);
  };
  auto remove = [&](int j) {
    g.erase(g.begin() + j);
    if (j > 0 && static_cast<size_t>(j) < g.size() &&
        g[static_cast<size_t>(j) - 1].second == g[static_cast<size_t>(j)].second) {
      g[static_cast<size_t>(j) - 1].first *= g[static_cast<size_t>(j)].first;
      g.erase(g.begin() + j);
    }
  };
  int j = last_reduced();
  if (j < 0) {  // nothing to fold: out = map(x)
    const int64_t n = shape_numel(shape);
    ctx.parallel_for(n, kReduceTask, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) out[i] = p.map(x[i]);
    });
    return;
  }
  int passes = 0;
  for (const auto& e : g) passes += e.second ? 1 : 0;
  std::vector<Acc> cur, next;
  auto [A, B] = view(j);
  const int64_t R = g[static_cast<size_t>(j)].first;
  Acc* dst = out;
  if (passes > 1) {
    cur.resize(static_cast<size_t>(A * B));
    dst = cur.data();
  }
  reduce_pass(ctx, p, x, dst, A, R, B);
  remove(j);
  const CombineOnly<P> c{p};
  while ((j = last_reduced()) >= 0) {
    --passes;
    auto [A2, B2] = view(j);
    const int64_t R2 = g[static_cast<size_t>(j)].first;
    Acc* d2 = out;
    if (passes > 1) {
      next.resize(static_cast<size_t>(A2 * B2));
      d2 = next.data();
    }
    reduce_pass(ctx, c, cur.data(), d2, A2, R2, B2);
    remove(j);
    cur.swap(next);
  }
}

}  // namespace tensord::cpu
