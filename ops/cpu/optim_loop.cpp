// The fused optimizer loops (see optim_loop.h). Built with -fno-math-errno
// (ops/CMakeLists.txt) so sqrt vectorises; every loop exists twice, for the
// baseline ISA and for AVX2+FMA (chosen once at run time). Floating-point
// contraction stays off (ISO C++ mode), so both give the same bits.
//
// Shape of one pass: the tensors are cut into blocks of kBlock elements; a
// block's inputs are read straight from the old buffers (converted to float
// first for bfloat16/float16), the update runs over the block into small
// L1-resident arrays, and those are written to the new buffers with
// non-temporal stores: the new buffers are never read, so the stores skip the
// read-for-ownership a plain store would cost. Per element that is exactly
// one read of each input and one write of each output.
#include "ops/cpu/optim_loop.h"

#include <emmintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ops/cpu/half_simd.h"
#include "ops/error.h"
#include "ops/kernels/float_conv.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

#define OPTIM_ALWAYS_INLINE [[gnu::always_inline]] inline

constexpr int64_t kBlock = 256;       // elements per block (multiple of 64 bytes for every dtype)
constexpr int64_t kGrainBlocks = 64;  // blocks per parallel chunk at least (16K elements)

template <DType D>
struct Elem;
template <>
struct Elem<DType::kFloat32> {
  using storage = float;
  using math = float;
};
template <>
struct Elem<DType::kFloat64> {
  using storage = double;
  using math = double;
};
template <>
struct Elem<DType::kBFloat16> {
  using storage = uint16_t;
  using math = float;
};
template <>
struct Elem<DType::kFloat16> {
  using storage = uint16_t;
  using math = float;
};

// Block i0..i0+n of `base` as math values: the buffer itself when it already
// holds them, else converted into `tmp`.
template <DType D>
OPTIM_ALWAYS_INLINE const typename Elem<D>::math* load_block(const void* base, int64_t i0, int64_t n,
                                                             typename Elem<D>::math* tmp) {
  using S = typename Elem<D>::storage;
  const S* src = static_cast<const S*>(base) + i0;
  if constexpr (D == DType::kFloat32 || D == DType::kFloat64) {
    return src;
  } else if constexpr (D == DType::kBFloat16) {
    for (int64_t j = 0; j < n; ++j) tmp[j] = kernels::bf16_to_f32(src[j]);
    return tmp;
  } else {
    cpu::f16_to_f32_n(src, tmp, n);
    return tmp;
  }
}

// Copies `bytes` from an L1 block to the new buffer: streaming stores for the
// 16-byte-aligned body, memcpy for the rest.
OPTIM_ALWAYS_INLINE void stream_bytes(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if ((reinterpret_cast<uintptr_t>(d) & 15u) == 0 && (reinterpret_cast<uintptr_t>(s) & 15u) == 0) {
    const size_t body = bytes & ~size_t{63};
    for (size_t off = 0; off < body; off += 64) {
      __m128i a = _mm_load_si128(reinterpret_cast<const __m128i*>(s + off));
      __m128i b = _mm_load_si128(reinterpret_cast<const __m128i*>(s + off + 16));
      __m128i c = _mm_load_si128(reinterpret_cast<const __m128i*>(s + off + 32));
      __m128i e = _mm_load_si128(reinterpret_cast<const __m128i*>(s + off + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + off), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + off + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + off + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + off + 48), e);
    }
    d += body;
    s += body;
    bytes -= body;
  }
  if (bytes) std::memcpy(d, s, bytes);
}

template <DType D>
OPTIM_ALWAYS_INLINE void store_block(void* base, int64_t i0, int64_t n, const typename Elem<D>::math* vals,
                                     uint16_t* narrow_tmp) {
  using S = typename Elem<D>::storage;
  S* dst = static_cast<S*>(base) + i0;
  if constexpr (D == DType::kFloat32 || D == DType::kFloat64) {
    stream_bytes(dst, vals, static_cast<size_t>(n) * sizeof(S));
  } else {
    if constexpr (D == DType::kBFloat16) {
      for (int64_t j = 0; j < n; ++j) narrow_tmp[j] = kernels::f32_to_bf16(vals[j]);
    } else {
      cpu::f32_to_f16_n(vals, narrow_tmp, n);
    }
    stream_bytes(dst, narrow_tmp, static_cast<size_t>(n) * sizeof(S));
  }
}

// The element loop over one block; restrict lets it vectorise without
// run-time overlap checks.
template <class Rule, class M>
OPTIM_ALWAYS_INLINE void compute_block(const Rule& r, int64_t n, const M* __restrict p_in, const M* __restrict g_in,
                                       const M* __restrict s0_in, const M* __restrict s1_in, const M* __restrict s2_in,
                                       M* __restrict p_out, M* __restrict s0_out, M* __restrict s1_out,
                                       M* __restrict s2_out) {
  constexpr int K = Rule::kStates;
  for (int64_t j = 0; j < n; ++j) {
    M p = p_in[j];
    M s0 = M(0), s1 = M(0), s2 = M(0);
    if constexpr (K > 0 && Rule::kReadsState) s0 = s0_in[j];
    if constexpr (K > 1) s1 = s1_in[j];
    if constexpr (K > 2) s2 = s2_in[j];
    r(p, g_in[j], s0, s1, s2);
    p_out[j] = p;
    if constexpr (K > 0) s0_out[j] = s0;
    if constexpr (K > 1) s1_out[j] = s1;
    if constexpr (K > 2) s2_out[j] = s2;
  }
}

template <DType D, class Rule>
OPTIM_ALWAYS_INLINE void span(const Rule& r, const OptimTensorIO& io, int64_t begin, int64_t end) {
  using M = typename Elem<D>::math;
  constexpr int K = Rule::kStates;
  alignas(64) M p_tmp[kBlock], g_tmp[kBlock], p_new[kBlock];
  alignas(64) M s_tmp[3][kBlock], s_new[3][kBlock];
  alignas(64) uint16_t narrow[kBlock];
  for (int64_t i0 = begin; i0 < end; i0 += kBlock) {
    const int64_t n = std::min(kBlock, end - i0);
    const M* p = load_block<D>(io.param, i0, n, p_tmp);
    const M* g = load_block<D>(io.grad, i0, n, g_tmp);
    const M* s[3] = {s_tmp[0], s_tmp[1], s_tmp[2]};
    for (int k = 0; k < K; ++k) {
      if (k == 0 && !Rule::kReadsState) continue;
      if (io.state_in[k]) {
        s[k] = load_block<D>(io.state_in[k], i0, n, s_tmp[k]);
      } else {
        std::fill(s_tmp[k], s_tmp[k] + n, static_cast<M>(io.state_init[k]));
      }
    }
    compute_block(r, n, p, g, s[0], s[1], s[2], p_new, s_new[0], s_new[1], s_new[2]);
    store_block<D>(io.param_out, i0, n, p_new, narrow);
    for (int k = 0; k < K; ++k) store_block<D>(io.state_out[k], i0, n, s_new[k], narrow);
  }
}

template <DType D, class Rule>
void span_baseline(const Rule& r, const OptimTensorIO& io, int64_t begin, int64_t end) {
  span<D>(r, io, begin, end);
}

template <DType D, class Rule>
[[gnu::target("avx2,fma")]] void span_avx2(const Rule& r, const OptimTensorIO& io, int64_t begin, int64_t end) {
  span<D>(r, io, begin, end);
}

bool detect_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
const bool kHaveAvx2 = detect_avx2();

// A tensor's loop with its hyper-parameters type-erased, so one table of
// function pointers drives a list of tensors of mixed dtypes and states.
using SpanFn = void (*)(const void* hyper, const OptimTensorIO& io, int64_t begin, int64_t end);

template <DType D, class Opt>
void run_span(const void* hyper, const OptimTensorIO& io, int64_t begin, int64_t end) {
  using Rule = typename Opt::template Rule<typename Elem<D>::math>;
  const Rule r = Rule::make(*static_cast<const typename Opt::Hyper*>(hyper), io.step);
  if (kHaveAvx2) {
    span_avx2<D>(r, io, begin, end);
  } else {
    span_baseline<D>(r, io, begin, end);
  }
}

template <class Opt>
SpanFn span_for(DType d) {
  switch (d) {
    case DType::kFloat32:
      return &run_span<DType::kFloat32, Opt>;
    case DType::kFloat64:
      return &run_span<DType::kFloat64, Opt>;
    case DType::kBFloat16:
      return &run_span<DType::kBFloat16, Opt>;
    case DType::kFloat16:
      return &run_span<DType::kFloat16, Opt>;
    default:
      TENSORD_ASSERT(false && "optimizer dtype validated before the loop");
      return nullptr;
  }
}

// Runs every tensor's span over the pool: the blocks of all tensors form one
// index space, so a list of many small tensors splits as well as one big one.
void run_all(const OpContext& ctx, const void* hyper, const std::vector<OptimTensorIO>& ts,
             const std::vector<SpanFn>& fns) {
  std::vector<int64_t> first(ts.size() + 1, 0);
  for (size_t i = 0; i < ts.size(); ++i) first[i + 1] = first[i] + (ts[i].numel + kBlock - 1) / kBlock;
  ctx.parallel_for(first.back(), kGrainBlocks, [&](int64_t ub, int64_t ue) {
    size_t t = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), ub) - first.begin()) - 1;
    while (ub < ue && t < ts.size()) {
      const int64_t tend = std::min(ue, first[t + 1]);
      const int64_t eb = (ub - first[t]) * kBlock;
      const int64_t ee = std::min(ts[t].numel, (tend - first[t]) * kBlock);
      if (eb < ee) fns[t](hyper, ts[t], eb, ee);
      ub = tend;
      ++t;
    }
    _mm_sfence();  // streaming stores are weakly ordered: publish them before the join
  });
}

// ---------------------------------------------------------------- rules

template <bool kAdamW, bool kDecay, bool kAmsgrad>
struct AdamOpt {
  using Hyper = kernels::AdamHyper;
  template <class M>
  struct Rule {
    static constexpr int kStates = kAmsgrad ? 3 : 2;
    static constexpr bool kReadsState = true;
    kernels::AdamScalars<M> s;
    static Rule make(const Hyper& h, double step) { return Rule{kernels::adam_scalars<M>(h, step)}; }
    OPTIM_ALWAYS_INLINE void operator()(M& p, M g, M& s0, M& s1, M& s2) const {
      kernels::adam_update<M, kAdamW, kDecay, kAmsgrad>(p, g, s0, s1, s2, s);
    }
  };
};

template <bool kDecay, bool kMomentum, bool kNesterov, bool kFirst>
struct SgdOpt {
  using Hyper = kernels::SgdHyper;
  template <class M>
  struct Rule {
    static constexpr int kStates = kMomentum ? 1 : 0;
    static constexpr bool kReadsState = !kFirst;
    kernels::SgdScalars<M> s;
    static Rule make(const Hyper& h, double) { return Rule{kernels::sgd_scalars<M>(h)}; }
    OPTIM_ALWAYS_INLINE void operator()(M& p, M g, M& s0, M&, M&) const {
      kernels::sgd_update<M, kDecay, kMomentum, kNesterov, kFirst>(p, g, s0, s);
    }
  };
};

template <bool kDecay>
struct AdagradOpt {
  using Hyper = kernels::AdagradHyper;
  template <class M>
  struct Rule {
    static constexpr int kStates = 1;
    static constexpr bool kReadsState = true;
    kernels::AdagradScalars<M> s;
    static Rule make(const Hyper& h, double step) { return Rule{kernels::adagrad_scalars<M>(h, step)}; }
    OPTIM_ALWAYS_INLINE void operator()(M& p, M g, M& s0, M&, M&) const {
      kernels::adagrad_update<M, kDecay>(p, g, s0, s);
    }
  };
};

// bool flags -> template instantiation.
template <bool A, bool W>
SpanFn adam_fn2(bool amsgrad, DType d) {
  return amsgrad ? span_for<AdamOpt<A, W, true>>(d) : span_for<AdamOpt<A, W, false>>(d);
}
template <bool A>
SpanFn adam_fn1(bool decay, bool amsgrad, DType d) {
  return decay ? adam_fn2<A, true>(amsgrad, d) : adam_fn2<A, false>(amsgrad, d);
}
SpanFn adam_fn(bool adamw, bool decay, bool amsgrad, DType d) {
  return adamw ? adam_fn1<true>(decay, amsgrad, d) : adam_fn1<false>(decay, amsgrad, d);
}

template <bool W>
SpanFn sgd_fn1(bool momentum, bool nesterov, bool first, DType d) {
  if (!momentum) return span_for<SgdOpt<W, false, false, false>>(d);
  if (nesterov) return first ? span_for<SgdOpt<W, true, true, true>>(d) : span_for<SgdOpt<W, true, true, false>>(d);
  return first ? span_for<SgdOpt<W, true, false, true>>(d) : span_for<SgdOpt<W, true, false, false>>(d);
}
SpanFn sgd_fn(bool decay, bool momentum, bool nesterov, bool first, DType d) {
  return decay ? sgd_fn1<true>(momentum, nesterov, first, d) : sgd_fn1<false>(momentum, nesterov, first, d);
}

}  // namespace

void fused_adam_cpu(const OpContext& ctx, const kernels::AdamHyper& h, const std::vector<OptimTensorIO>& ts) {
  std::vector<SpanFn> fns;
  fns.reserve(ts.size());
  for (const auto& t : ts) fns.push_back(adam_fn(h.adamw, h.weight_decay != 0, h.amsgrad, t.dtype));
  run_all(ctx, &h, ts, fns);
}

void fused_sgd_cpu(const OpContext& ctx, const kernels::SgdHyper& h, const std::vector<OptimTensorIO>& ts) {
  std::vector<SpanFn> fns;
  fns.reserve(ts.size());
  for (const auto& t : ts) {
    fns.push_back(sgd_fn(h.weight_decay != 0, h.momentum != 0, h.nesterov, t.state_in[0] == nullptr, t.dtype));
  }
  run_all(ctx, &h, ts, fns);
}

void fused_adagrad_cpu(const OpContext& ctx, const kernels::AdagradHyper& h, const std::vector<OptimTensorIO>& ts) {
  std::vector<SpanFn> fns;
  fns.reserve(ts.size());
  for (const auto& t : ts) {
    fns.push_back(h.weight_decay != 0 ? span_for<AdagradOpt<true>>(t.dtype) : span_for<AdagradOpt<false>>(t.dtype));
  }
  run_all(ctx, &h, ts, fns);
}

bool optim_loop_uses_avx2() {
  return kHaveAvx2;
}

}  // namespace tensord
