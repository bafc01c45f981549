// MX quantize on AVX2: ops/kernels/mx.h's scale and element arithmetic in
// 8 float32 lanes, the same IEEE operations in the same order (a multiply by
// the power-of-two inverse scale, an add of the subnormal magic, the rest
// integer), so the codes are bit-identical to the portable loop. The scales
// of 8 blocks are computed together (a transposing max tree, then one
// vector division for rceil). Built with -mavx2 -mfma -mf16c and
// -ffp-contract=off (a fused multiply-add would skip the product's
// rounding); called only when CPUID reports all three (mx_avx2_supported).
// Everything here is in an anonymous namespace or uses intrinsics only, so
// no AVX2 copy of a shared inline function can stand in for the portable one
// (the CPUID check lives in the portable mx_loop.cpp for the same reason).
#include "ops/cpu/mx_quantize_avx2.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>

namespace tensord {
namespace {

using kernels::MxElemSpec;
using kernels::MxFormat;
using kernels::MxScaleRounding;

inline __m256i splat(int v) {
  return _mm256_set1_epi32(v);
}

template <MxInput In>
inline __m256 load8(const void* p, int64_t i) {
  if constexpr (In == MxInput::kFloat32) {
    return _mm256_loadu_ps(static_cast<const float*>(p) + i);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
    if constexpr (In == MxInput::kFloat16) {
      return _mm256_cvtph_ps(h);  // exact, as f16_to_f32 (a NaN stays a NaN)
    } else {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
}

inline __m256i abs_bits(__m256 v) {
  return _mm256_and_si256(_mm256_castps_si256(v), splat(0x7fffffff));
}

// r[k] = the largest lane of m[k] (unsigned), for 8 vectors.
inline __m256i hmax8(const __m256i* m) {
  const __m256i t0 = _mm256_max_epu32(_mm256_unpacklo_epi32(m[0], m[1]), _mm256_unpackhi_epi32(m[0], m[1]));
  const __m256i t1 = _mm256_max_epu32(_mm256_unpacklo_epi32(m[2], m[3]), _mm256_unpackhi_epi32(m[2], m[3]));
  const __m256i t2 = _mm256_max_epu32(_mm256_unpacklo_epi32(m[4], m[5]), _mm256_unpackhi_epi32(m[4], m[5]));
  const __m256i t3 = _mm256_max_epu32(_mm256_unpacklo_epi32(m[6], m[7]), _mm256_unpackhi_epi32(m[6], m[7]));
  const __m256i u0 = _mm256_max_epu32(_mm256_unpacklo_epi64(t0, t1), _mm256_unpackhi_epi64(t0, t1));
  const __m256i u1 = _mm256_max_epu32(_mm256_unpacklo_epi64(t2, t3), _mm256_unpackhi_epi64(t2, t3));
  return _mm256_max_epu32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

// kernels::mx_scale_floor / mx_scale_rceil per lane (amax: sign-clear bits).
template <MxFormat F>
inline __m256i scale_codes(__m256i amax, MxScaleRounding r) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i nan = _mm256_cmpgt_epi32(amax, splat(0x7f7fffff));
  __m256i code;
  if (r == MxScaleRounding::kFloor) {
    code = _mm256_sub_epi32(_mm256_srli_epi32(amax, 23), splat(s.emax));
    code = _mm256_min_epi32(_mm256_max_epi32(code, zero), splat(254));
  } else {
    const __m256i d = _mm256_castps_si256(_mm256_div_ps(_mm256_castsi256_ps(amax), _mm256_set1_ps(s.max_value)));
    const __m256i e = _mm256_srli_epi32(d, 23);
    const __m256i m = _mm256_and_si256(d, splat(0x7fffff));
    // e + (m != 0): cmpeq gives -1 where m == 0.
    const __m256i normal = _mm256_add_epi32(_mm256_add_epi32(e, splat(1)), _mm256_cmpeq_epi32(m, zero));
    const __m256i sub = _mm256_srli_epi32(_mm256_cmpgt_epi32(m, splat(0x400000)), 31);
    code = _mm256_blendv_epi8(normal, sub, _mm256_cmpeq_epi32(e, zero));
    code = _mm256_min_epu32(code, splat(254));
  }
  return _mm256_blendv_epi8(code, splat(0xff), nan);
}

// kernels::mx_inv_scale per lane (a NaN code gives some finite factor; its
// block's codes are zeroed).
inline __m256 inv_scales(__m256i code) {
  const __m256i e = _mm256_sub_epi32(splat(254), code);
  const __m256i pos = _mm256_cmpgt_epi32(e, _mm256_setzero_si256());
  return _mm256_castsi256_ps(_mm256_blendv_epi8(splat(0x00400000), _mm256_slli_epi32(e, 23), pos));
}

// kernels::mx_encode per lane.
template <MxFormat F>
inline __m256i encode8(__m256 x, __m256 inv) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  constexpr int emin = 1 - s.bias;
  constexpr int shift = 23 - s.mbits;
  const __m256i xb = _mm256_castps_si256(x);
  const __m256i sign = _mm256_srli_epi32(_mm256_and_si256(xb, splat(static_cast<int>(0x80000000u))), 32 - s.bits);
  const __m256 y = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(xb, splat(0x7fffffff))), inv);
  const __m256i yb = _mm256_castps_si256(y);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(yb, shift), splat(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(yb, splat((1 << (shift - 1)) - 1)), odd), shift);
  const __m256i normal = _mm256_sub_epi32(rounded, splat((127 + emin - 1) << s.mbits));
  const __m256 magic = _mm256_castsi256_ps(splat((127 + emin - s.mbits + 23) << 23));
  const __m256i sub = _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(y, magic)), _mm256_castps_si256(magic));
  const __m256i is_sub = _mm256_cmpgt_epi32(splat((127 + emin) << 23), yb);
  const __m256i code = _mm256_min_epu32(_mm256_blendv_epi8(normal, sub, is_sub), splat(static_cast<int>(s.max_code)));
  return _mm256_or_si256(sign, code);
}

// The low bytes of 4 x 8 codes, in element order.
inline __m256i pack_bytes(__m256i c0, __m256i c1, __m256i c2, __m256i c3) {
  const __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(c0, c1), _mm256_packs_epi32(c2, c3));
  return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// The low bytes of 8 codes to out[0..8).
inline void store_low_bytes8(uint8_t* out, __m256i c) {
  const __m256i lanes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                         0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i b =
      _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(c, lanes), _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(b));
}

// 32 consecutive inputs from x[i], one scale: 32 * bits / 8 bytes to out.
template <MxInput In, MxFormat F>
inline void encode32(const void* x, int64_t i, __m256 inv, uint8_t* out) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  const __m256i b = pack_bytes(encode8<F>(load8<In>(x, i), inv), encode8<F>(load8<In>(x, i + 8), inv),
                               encode8<F>(load8<In>(x, i + 16), inv), encode8<F>(load8<In>(x, i + 24), inv));
  if constexpr (s.bits == 8) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), b);
  } else if constexpr (s.bits == 4) {  // byte j = code 2j | code 2j+1 << 4
    const __m256i v = _mm256_or_si256(_mm256_and_si256(b, _mm256_set1_epi16(0x000f)),
                                      _mm256_and_si256(_mm256_srli_epi16(b, 4), _mm256_set1_epi16(0x00f0)));
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi16(v, v), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(p));
  } else {  // 4 codes -> the 24-bit word c0 | c1 << 6 | c2 << 12 | c3 << 18
    const __m256i w = _mm256_or_si256(
        _mm256_or_si256(_mm256_and_si256(b, splat(0x3f)), _mm256_and_si256(_mm256_srli_epi32(b, 2), splat(0xfc0))),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(b, 4), splat(0x3f000)),
                        _mm256_and_si256(_mm256_srli_epi32(b, 6), splat(0xfc0000))));
    const __m256i three = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,  //
                                           0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    const __m256i p =
        _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(w, three), _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(p));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 16), _mm256_extracti128_si256(p, 1));
  }
}

// Contiguous blocks, 8 at a time: their amaxes, then their scales at once,
// then each block's elements from L1.
template <MxInput In, MxFormat F>
void quantize_blocks(const void* x, int64_t bs, int64_t nblocks, uint8_t* q, uint8_t* sc, MxScaleRounding r) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  const int64_t block_bytes = bs * s.bits / 8;
  for (int64_t b0 = 0; b0 < nblocks; b0 += 8) {
    const int64_t nb = nblocks - b0 < 8 ? nblocks - b0 : 8;
    __m256i m[8];
    for (int64_t k = 0; k < 8; ++k) {
      m[k] = _mm256_setzero_si256();
      if (k >= nb) continue;
      const int64_t base = (b0 + k) * bs;
      __m256i a0 = abs_bits(load8<In>(x, base));
      __m256i a1 = abs_bits(load8<In>(x, base + 8));
      __m256i a2 = abs_bits(load8<In>(x, base + 16));
      __m256i a3 = abs_bits(load8<In>(x, base + 24));
      for (int64_t i = 32; i < bs; i += 32) {
        a0 = _mm256_max_epu32(a0, abs_bits(load8<In>(x, base + i)));
        a1 = _mm256_max_epu32(a1, abs_bits(load8<In>(x, base + i + 8)));
        a2 = _mm256_max_epu32(a2, abs_bits(load8<In>(x, base + i + 16)));
        a3 = _mm256_max_epu32(a3, abs_bits(load8<In>(x, base + i + 24)));
      }
      m[k] = _mm256_max_epu32(_mm256_max_epu32(a0, a1), _mm256_max_epu32(a2, a3));
    }
    const __m256i codes = scale_codes<F>(hmax8(m), r);
    alignas(32) int32_t code[8];
    alignas(32) float inv[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(code), codes);
    _mm256_store_ps(inv, inv_scales(codes));
    for (int64_t k = 0; k < nb; ++k) {
      sc[b0 + k] = static_cast<uint8_t>(code[k]);
      uint8_t* qb = q + (b0 + k) * block_bytes;
      if (code[k] == kernels::kE8M0Nan) {
        std::memset(qb, 0, static_cast<size_t>(block_bytes));
        continue;
      }
      const __m256 iv = _mm256_set1_ps(inv[k]);
      for (int64_t i = 0; i < bs; i += 32) encode32<In, F>(x, (b0 + k) * bs + i, iv, qb + i * s.bits / 8);
    }
  }
}

// One block row over ncols columns, 8 columns (lanes) at a time, each lane
// with its own scale.
template <MxInput In, MxFormat F>
void quantize_cols(const void* x, int64_t inner, int64_t bs, int64_t ncols, uint8_t* q, uint8_t* sc,
                   MxScaleRounding r) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  for (int64_t c = 0; c < ncols; c += 8) {
    __m256i amax = _mm256_setzero_si256();
    for (int64_t i = 0; i < bs; ++i) amax = _mm256_max_epu32(amax, abs_bits(load8<In>(x, i * inner + c)));
    const __m256i codes = scale_codes<F>(amax, r);
    store_low_bytes8(sc + c, codes);
    const __m256 inv = inv_scales(codes);
    const __m256i nan = _mm256_cmpeq_epi32(codes, splat(kernels::kE8M0Nan));
    auto code_row = [&](int64_t i) { return _mm256_andnot_si256(nan, encode8<F>(load8<In>(x, i * inner + c), inv)); };
    if constexpr (s.bits == 8) {
      for (int64_t i = 0; i < bs; ++i) store_low_bytes8(q + i * inner + c, code_row(i));
    } else if constexpr (s.bits == 4) {
      for (int64_t k = 0; k < bs / 2; ++k) {
        store_low_bytes8(q + k * inner + c,
                         _mm256_or_si256(code_row(2 * k), _mm256_slli_epi32(code_row(2 * k + 1), 4)));
      }
    } else {
      for (int64_t k = 0; k < bs / 4; ++k) {
        const __m256i w = _mm256_or_si256(
            _mm256_or_si256(code_row(4 * k), _mm256_slli_epi32(code_row(4 * k + 1), 6)),
            _mm256_or_si256(_mm256_slli_epi32(code_row(4 * k + 2), 12), _mm256_slli_epi32(code_row(4 * k + 3), 18)));
        store_low_bytes8(q + (3 * k) * inner + c, w);
        store_low_bytes8(q + (3 * k + 1) * inner + c, _mm256_srli_epi32(w, 8));
        store_low_bytes8(q + (3 * k + 2) * inner + c, _mm256_srli_epi32(w, 16));
      }
    }
  }
}

template <MxInput In, class Fn>
void with_format(MxFormat f, Fn&& fn) {
  switch (f) {
    case MxFormat::kFp8E4M3:
      return fn.template operator()<In, MxFormat::kFp8E4M3>();
    case MxFormat::kFp8E5M2:
      return fn.template operator()<In, MxFormat::kFp8E5M2>();
    case MxFormat::kFp6E2M3:
      return fn.template operator()<In, MxFormat::kFp6E2M3>();
    case MxFormat::kFp6E3M2:
      return fn.template operator()<In, MxFormat::kFp6E3M2>();
    case MxFormat::kFp4E2M1:
      return fn.template operator()<In, MxFormat::kFp4E2M1>();
  }
}

template <class Fn>
void with_types(MxInput in, MxFormat f, Fn&& fn) {
  switch (in) {
    case MxInput::kFloat32:
      return with_format<MxInput::kFloat32>(f, fn);
    case MxInput::kFloat16:
      return with_format<MxInput::kFloat16>(f, fn);
    case MxInput::kBFloat16:
      return with_format<MxInput::kBFloat16>(f, fn);
  }
}

}  // namespace

void mx_quantize_blocks_avx2(MxInput in, MxFormat f, MxScaleRounding r, const void* x, int64_t block, int64_t nblocks,
                             uint8_t* q, uint8_t* sc) {
  with_types(in, f, [&]<MxInput I, MxFormat F>() { quantize_blocks<I, F>(x, block, nblocks, q, sc, r); });
}

void mx_quantize_cols_avx2(MxInput in, MxFormat f, MxScaleRounding r, const void* x, int64_t inner, int64_t block,
                           int64_t ncols, uint8_t* q, uint8_t* sc) {
  with_types(in, f, [&]<MxInput I, MxFormat F>() { quantize_cols<I, F>(x, inner, block, ncols, q, sc, r); });
}

}  // namespace tensord
#else
#include <cstdlib>

namespace tensord {

void mx_quantize_blocks_avx2(MxInput, kernels::MxFormat, kernels::MxScaleRounding, const void*, int64_t, int64_t,
                             uint8_t*, uint8_t*) {
  std::abort();  // unreachable: mx_avx2_supported() is false off x86-64
}

void mx_quantize_cols_avx2(MxInput, kernels::MxFormat, kernels::MxScaleRounding, const void*, int64_t, int64_t, int64_t,
                           uint8_t*, uint8_t*) {
  std::abort();  // unreachable: mx_avx2_supported() is false off x86-64
}

}  // namespace tensord
#endif
