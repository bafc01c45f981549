// MX quantize/dequantize loops. A block along a contiguous axis (inner == 1)
// is a run of `block` inputs and block * bits / 8 output bytes; along another
// axis a work item is a block row over up to kCols columns of the inner dims,
// so loads and stores stay row-contiguous. Quantize runs the AVX2 loops of
// ops/cpu/mx_quantize_avx2.cpp where the CPU has them (contiguous blocks of
// a multiple of 32; strided column groups of 8), this loop for the rest.
#include "ops/cpu/mx_loop.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "ops/cpu/mx_quantize_avx2.h"
#include "ops/error.h"
#include "ops/mx_tensor.h"
#include "ops/kernels/scalar_traits.h"

namespace tensord {
namespace {

using kernels::MxElemSpec;
using kernels::MxFormat;
using kernels::MxScaleRounding;

constexpr int64_t kChunk = 256;  // elements encoded per step (a multiple of every group)
constexpr int64_t kCols = 64;    // inner columns per strided work item
constexpr int64_t kGrainElems = int64_t{1} << 15;

template <class In>
TENSORD_INLINE float load_f32(const In* p, int64_t i) {
  return kernels::ScalarTraits<In>::load(p[i]);
}

// Encodes n (a multiple of the group) values at x[0], x[xs], ... and packs
// them into bytes at q[0], q[qs], ....
template <class In, MxFormat F>
void encode_run(const In* x, int64_t xs, int64_t n, float inv, uint8_t* q, int64_t qs) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  uint32_t codes[kChunk];
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t m = std::min(kChunk, n - c0);
    if (xs == 1) {  // unit stride: the loop vectorises (the stride would block it)
      const In* xc = x + c0;
      for (int64_t i = 0; i < m; ++i) codes[i] = kernels::mx_encode(load_f32(xc, i), inv, s);
    } else {
      for (int64_t i = 0; i < m; ++i) codes[i] = kernels::mx_encode(load_f32(x, (c0 + i) * xs), inv, s);
    }
    uint8_t* out = q + (c0 / s.group_elems) * s.group_bytes * qs;
    if constexpr (s.bits == 8) {
      for (int64_t i = 0; i < m; ++i) out[i * qs] = static_cast<uint8_t>(codes[i]);
    } else if constexpr (s.bits == 4) {
      for (int64_t g = 0; g < m / 2; ++g) {
        out[g * qs] = static_cast<uint8_t>(codes[2 * g] | (codes[2 * g + 1] << 4));
      }
    } else {
      for (int64_t g = 0; g < m / 4; ++g) kernels::mx_pack_group(codes + 4 * g, s, out + 3 * g * qs, qs);
    }
  }
}

template <class In>
constexpr MxInput mx_input() {
  if constexpr (std::is_same_v<In, float>) {
    return MxInput::kFloat32;
  } else if constexpr (std::is_same_v<In, Half>) {
    return MxInput::kFloat16;
  } else {
    return MxInput::kBFloat16;
  }
}

// Portable: one block of `bs` consecutive inputs.
template <class In, MxFormat F>
void quantize_block(const In* xb, int64_t bs, MxScaleRounding r, uint8_t* qb, uint8_t* scb) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  uint32_t amax = 0;
  for (int64_t i = 0; i < bs; ++i) amax = std::max(amax, kernels::f32_bits(load_f32(xb, i)) & 0x7fffffffu);
  const uint8_t code = kernels::mx_scale(amax, s, r);
  *scb = code;
  if (code == kernels::kE8M0Nan) {
    std::memset(qb, 0, static_cast<size_t>(bs / s.group_elems * s.group_bytes));
  } else {
    encode_run<In, F>(xb, 1, bs, kernels::mx_inv_scale(code), qb, 1);
  }
}

// Portable: one block row over nc columns (at most kCols), `inner` apart.
template <class In, MxFormat F>
void quantize_cols(const In* xb, int64_t inner, int64_t bs, int64_t nc, MxScaleRounding r, uint8_t* qb, uint8_t* scb) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  const int64_t block_bytes = bs / s.group_elems * s.group_bytes;
  uint32_t amax[kCols];
  std::fill(amax, amax + nc, 0u);
  for (int64_t i = 0; i < bs; ++i) {
    const In* row = xb + i * inner;
    for (int64_t c = 0; c < nc; ++c) amax[c] = std::max(amax[c], kernels::f32_bits(load_f32(row, c)) & 0x7fffffffu);
  }
  for (int64_t c = 0; c < nc; ++c) {
    const uint8_t code = kernels::mx_scale(amax[c], s, r);
    scb[c] = code;
    if (code == kernels::kE8M0Nan) {
      for (int64_t k = 0; k < block_bytes; ++k) qb[k * inner + c] = 0;
    } else {
      encode_run<In, F>(xb + c, inner, bs, kernels::mx_inv_scale(code), qb + c, inner);
    }
  }
}

template <class In, MxFormat F>
void quantize_typed(const OpContext& ctx, const In* x, uint8_t* q, uint8_t* sc, MxScaleRounding r, const MxLayout& l,
                    bool avx2) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  const int64_t bs = l.block;
  const int64_t block_bytes = bs / s.group_elems * s.group_bytes;
  const int64_t nb = l.nblocks();
  if (l.inner == 1) {
    const int64_t blocks = l.outer * nb;
    const bool vec = avx2 && bs % 32 == 0;
    ctx.parallel_for(blocks, std::max<int64_t>(1, kGrainElems / bs), [&](int64_t b0, int64_t b1) {
      if (vec) {
        mx_quantize_blocks_avx2(mx_input<In>(), F, r, x + b0 * bs, bs, b1 - b0, q + b0 * block_bytes, sc + b0);
        return;
      }
      for (int64_t b = b0; b < b1; ++b) quantize_block<In, F>(x + b * bs, bs, r, q + b * block_bytes, sc + b);
    });
    return;
  }
  const int64_t col_chunks = (l.inner + kCols - 1) / kCols;
  const int64_t items = l.outer * nb * col_chunks;
  const int64_t lenp = l.len / s.group_elems * s.group_bytes;
  ctx.parallel_for(items, std::max<int64_t>(1, kGrainElems / (bs * kCols)), [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t cc = w % col_chunks;
      const int64_t j = (w / col_chunks) % nb;
      const int64_t o = w / (col_chunks * nb);
      const int64_t c0 = cc * kCols;
      const int64_t nc = std::min(kCols, l.inner - c0);
      const In* xb = x + (o * l.len + j * bs) * l.inner + c0;
      uint8_t* scb = sc + (o * nb + j) * l.inner + c0;
      uint8_t* qb = q + (o * lenp + j * block_bytes) * l.inner + c0;
      const int64_t nv = avx2 ? nc / 8 * 8 : 0;  // columns the AVX2 loop takes
      if (nv > 0) mx_quantize_cols_avx2(mx_input<In>(), F, r, xb, l.inner, bs, nv, qb, scb);
      if (nv < nc) quantize_cols<In, F>(xb + nv, l.inner, bs, nc - nv, r, qb + nv, scb + nv);
    }
  });
}

// The code of element p of a fiber packed at q with byte stride qs.
template <MxFormat F>
TENSORD_INLINE uint32_t code_at(const uint8_t* q, int64_t qs, int64_t p) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  if constexpr (s.bits == 8) {
    return q[p * qs];
  } else if constexpr (s.bits == 4) {
    return (q[(p / 2) * qs] >> (4 * (p % 2))) & 0xfu;
  } else {
    const uint8_t* g = q + (p / 4) * 3 * qs;
    const uint32_t w =
        static_cast<uint32_t>(g[0]) | (static_cast<uint32_t>(g[qs]) << 8) | (static_cast<uint32_t>(g[2 * qs]) << 16);
    return (w >> (6 * (p % 4))) & 0x3fu;
  }
}

// Unscaled values of every code of the format (2^bits entries).
template <MxFormat F>
void decode_table(float* lut) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  for (uint32_t c = 0; c < (1u << s.bits); ++c) lut[c] = kernels::mx_decode(c, s);
}

// Decodes a run of n elements packed at q[0], q[qs], ... into out[0],
// out[os], ..., each times `scale`.
template <MxFormat F>
void decode_run(const uint8_t* q, int64_t qs, int64_t n, const float* lut, float scale, float* out, int64_t os) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  if constexpr (s.bits == 8) {
    for (int64_t i = 0; i < n; ++i) out[i * os] = lut[q[i * qs]] * scale;
  } else if constexpr (s.bits == 4) {
    for (int64_t g = 0; g < n / 2; ++g) {
      const uint8_t b = q[g * qs];
      out[2 * g * os] = lut[b & 0xfu] * scale;
      out[(2 * g + 1) * os] = lut[b >> 4] * scale;
    }
  } else {
    uint32_t codes[4];
    for (int64_t g = 0; g < n / 4; ++g) {
      kernels::mx_unpack_group(q + 3 * g * qs, qs, s, codes);
      for (int k = 0; k < 4; ++k) out[(4 * g + k) * os] = lut[codes[k]] * scale;
    }
  }
}

template <MxFormat F>
void dequantize_typed(const OpContext& ctx, const uint8_t* q, const uint8_t* sc, float* out, const MxLayout& l) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  float lut[256];
  decode_table<F>(lut);
  const int64_t bs = l.block;
  const int64_t block_bytes = bs / s.group_elems * s.group_bytes;
  const int64_t nb = l.nblocks();
  if (l.inner == 1) {
    ctx.parallel_for(l.outer * nb, std::max<int64_t>(1, kGrainElems / bs), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        decode_run<F>(q + b * block_bytes, 1, bs, lut, kernels::e8m0_to_f32(sc[b]), out + b * bs, 1);
      }
    });
    return;
  }
  const int64_t lenp = l.len / s.group_elems * s.group_bytes;
  const int64_t rows = l.outer * nb;
  ctx.parallel_for(rows, std::max<int64_t>(1, kGrainElems / (bs * l.inner)), [&](int64_t w0, int64_t w1) {
    float scale[kCols];
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t j = w % nb;
      const int64_t o = w / nb;
      const uint8_t* scb = sc + (o * nb + j) * l.inner;
      const uint8_t* qb = q + (o * lenp + j * block_bytes) * l.inner;
      float* ob = out + (o * l.len + j * bs) * l.inner;
      // Row by row across kCols columns at a time: contiguous loads and stores.
      for (int64_t c0 = 0; c0 < l.inner; c0 += kCols) {
        const int64_t nc = std::min(kCols, l.inner - c0);
        for (int64_t c = 0; c < nc; ++c) scale[c] = kernels::e8m0_to_f32(scb[c0 + c]);
        for (int64_t g = 0; g < bs / s.group_elems; ++g) {
          const uint8_t* qg = qb + g * s.group_bytes * l.inner + c0;
          for (int64_t r = 0; r < s.group_elems; ++r) {
            float* orow = ob + (g * s.group_elems + r) * l.inner + c0;
            for (int64_t c = 0; c < nc; ++c) orow[c] = lut[code_at<F>(qg + c, l.inner, r)] * scale[c];
          }
        }
      }
    }
  });
}

// The values of the 256 e8m0 codes (0xFF NaN), built once.
const float* scale_values() {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[static_cast<size_t>(c)] = kernels::e8m0_to_f32(static_cast<uint8_t>(c));
    return t;
  }();
  return table.data();
}

// The unscaled values of a format's codes, built once.
template <MxFormat F>
const float* code_values() {
  static const auto table = [] {
    std::array<float, 256> t{};
    decode_table<F>(t.data());
    return t;
  }();
  return table.data();
}

template <MxFormat F>
void dequantize_range_typed(const uint8_t* q, const uint8_t* sc, const MxLayout& l, int64_t t, int64_t count,
                            float* out) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  const float* lut = code_values<F>();
  const float* scales = scale_values();
  const int64_t bs = l.block;
  const int64_t nb = l.nblocks();
  const int64_t lenp = l.len / s.group_elems * s.group_bytes;
  while (count > 0) {
    const int64_t o = t / (l.len * l.inner);
    const int64_t p = (t / l.inner) % l.len;
    if (l.inner == 1) {  // along one fiber: whole groups of one block at a time
      const uint8_t* qf = q + o * lenp;
      const uint8_t* sf = sc + o * nb;
      const int64_t end = p + std::min(l.len - p, count);
      int64_t i = p;
      int64_t blk = i / bs;  // the only divisions by the runtime block size
      int64_t blk_end = (blk + 1) * bs;
      while (i < end) {
        const int64_t stop = std::min(blk_end, end);
        const float scale = kernels::e8m0_to_f32(sf[blk]);
        for (; i < stop && i % s.group_elems != 0; ++i) *out++ = lut[code_at<F>(qf, 1, i)] * scale;
        const int64_t piece = (stop - i) / s.group_elems * s.group_elems;
        if (piece > 0) {
          decode_run<F>(qf + i / s.group_elems * s.group_bytes, 1, piece, lut, scale, out, 1);
          out += piece;
          i += piece;
        }
        for (; i < stop; ++i) *out++ = lut[code_at<F>(qf, 1, i)] * scale;
        ++blk;
        blk_end += bs;
      }
      count -= end - p;
      t += end - p;
      continue;
    }
    // Along the inner dims: one position p of the block axis, columns c..
    const int64_t c = t % l.inner;
    const int64_t n = std::min(l.inner - c, count);
    const uint8_t* qg = q + (o * lenp + p / s.group_elems * s.group_bytes) * l.inner + c;
    const uint8_t* sr = sc + (o * nb + p / bs) * l.inner + c;
    const int64_t r = p % s.group_elems;
    for (int64_t j = 0; j < n; ++j) out[j] = lut[code_at<F>(qg + j, l.inner, r)] * scales[sr[j]];
    out += n;
    count -= n;
    t += n;
  }
}

template <class In>
void quantize_in(const OpContext& ctx, const In* x, uint8_t* q, uint8_t* sc, MxFormat f, MxScaleRounding r,
                 const MxLayout& l, bool avx2) {
  switch (f) {
    case MxFormat::kFp8E4M3:
      return quantize_typed<In, MxFormat::kFp8E4M3>(ctx, x, q, sc, r, l, avx2);
    case MxFormat::kFp8E5M2:
      return quantize_typed<In, MxFormat::kFp8E5M2>(ctx, x, q, sc, r, l, avx2);
    case MxFormat::kFp6E2M3:
      return quantize_typed<In, MxFormat::kFp6E2M3>(ctx, x, q, sc, r, l, avx2);
    case MxFormat::kFp6E3M2:
      return quantize_typed<In, MxFormat::kFp6E3M2>(ctx, x, q, sc, r, l, avx2);
    case MxFormat::kFp4E2M1:
      return quantize_typed<In, MxFormat::kFp4E2M1>(ctx, x, q, sc, r, l, avx2);
  }
}

}  // namespace

MxLayout mx_layout_of(const MxMeta& m) {
  MxLayout l;
  const auto ax = static_cast<size_t>(m.dim_axis);
  for (size_t d = 0; d < ax; ++d) l.outer *= m.shape[d];
  for (size_t d = ax + 1; d < m.shape.size(); ++d) l.inner *= m.shape[d];
  l.len = m.shape[ax];
  l.block = m.block_size;
  return l;
}

bool mx_avx2_supported() {
#if defined(__x86_64__)
  // F16C is not asked for by name: clang 14 (the fuzz build) does not know
  // the string, and every CPU with AVX2 and FMA (Haswell, Zen and later)
  // has it.
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
#else
  return false;
#endif
}

MxIsa mx_default_isa() {
  static const MxIsa isa = [] {
    const char* env = std::getenv("TENSORD_CPU_ISA");
    const std::string cap = env ? env : "";
    if (cap == "portable" || cap == "scalar" || !mx_avx2_supported()) return MxIsa::kPortable;
    return MxIsa::kAvx2;
  }();
  return isa;
}

void mx_quantize_cpu(const OpContext& ctx, const Tensor& x, MxFormat f, MxScaleRounding r, const MxLayout& l,
                     Tensor& elements, Tensor& scale, MxIsa isa) {
  if (l.outer * l.len * l.inner == 0) return;
  const bool avx2 = isa == MxIsa::kAvx2 && mx_avx2_supported();
  auto* q = elements.data_ptr<uint8_t>();
  auto* sc = static_cast<uint8_t*>(scale.data());
  switch (x.dtype()) {
    case DType::kFloat32:
      return quantize_in(ctx, x.data_ptr<float>(), q, sc, f, r, l, avx2);
    case DType::kFloat16:
      return quantize_in(ctx, x.data_ptr<Half>(), q, sc, f, r, l, avx2);
    case DType::kBFloat16:
      return quantize_in(ctx, x.data_ptr<BFloat16>(), q, sc, f, r, l, avx2);
    default:
      TENSORD_ASSERT(false && "mx.quantize: dtype checked by infer");
  }
}

void mx_dequantize_range(const uint8_t* q, const uint8_t* sc, MxFormat f, const MxLayout& l, int64_t start,
                         int64_t count, float* out) {
  switch (f) {
    case MxFormat::kFp8E4M3:
      return dequantize_range_typed<MxFormat::kFp8E4M3>(q, sc, l, start, count, out);
    case MxFormat::kFp8E5M2:
      return dequantize_range_typed<MxFormat::kFp8E5M2>(q, sc, l, start, count, out);
    case MxFormat::kFp6E2M3:
      return dequantize_range_typed<MxFormat::kFp6E2M3>(q, sc, l, start, count, out);
    case MxFormat::kFp6E3M2:
      return dequantize_range_typed<MxFormat::kFp6E3M2>(q, sc, l, start, count, out);
    case MxFormat::kFp4E2M1:
      return dequantize_range_typed<MxFormat::kFp4E2M1>(q, sc, l, start, count, out);
  }
}

void mx_dequantize_cpu(const OpContext& ctx, const Tensor& elements, const Tensor& scale, MxFormat f, const MxLayout& l,
                       Tensor& out) {
  if (l.outer * l.len * l.inner == 0) return;
  const auto* q = elements.data_ptr<uint8_t>();
  const auto* sc = static_cast<const uint8_t*>(scale.data());
  float* o = out.data_ptr<float>();
  switch (f) {
    case MxFormat::kFp8E4M3:
      return dequantize_typed<MxFormat::kFp8E4M3>(ctx, q, sc, o, l);
    case MxFormat::kFp8E5M2:
      return dequantize_typed<MxFormat::kFp8E5M2>(ctx, q, sc, o, l);
    case MxFormat::kFp6E2M3:
      return dequantize_typed<MxFormat::kFp6E2M3>(ctx, q, sc, o, l);
    case MxFormat::kFp6E3M2:
      return dequantize_typed<MxFormat::kFp6E3M2>(ctx, q, sc, o, l);
    case MxFormat::kFp4E2M1:
      return dequantize_typed<MxFormat::kFp4E2M1>(ctx, q, sc, o, l);
  }
}

}  // namespace tensord
