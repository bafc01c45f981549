// OCP Microscaling (MX v1.0) arithmetic shared by the CPU loops and a CUDA
// kernel: the e8m0 block scale, element rounding, decoding and packing.
//
// Formats (sign bit on top of each code, then exponent, then mantissa):
//   mxfp8_e4m3  8 bits, bias 7,  emax 8,  max 448   (S.1111.111 is NaN)
//   mxfp8_e5m2  8 bits, bias 15, emax 15, max 57344 (S.11111.00 inf, .01-.11 NaN)
//   mxfp6_e2m3  6 bits, bias 1,  emax 2,  max 7.5   (no inf, no NaN)
//   mxfp6_e3m2  6 bits, bias 3,  emax 4,  max 28    (no inf, no NaN)
//   mxfp4_e2m1  4 bits, bias 1,  emax 2,  max 6     (no inf, no NaN)
// emax is the OCP emax_elem: the exponent of the largest normal.
//
// Block scale X = 2^(code - 127), an e8m0 code in [0, 254]; 0xFF is NaN.
//  - floor (OCP MX v1.0 6.3): X = 2^(floor(log2 amax) - emax), the exponent
//    clamped to [-127, 127]. floor(log2 amax) is read from amax's float32
//    exponent field (exact: no log2 call, no float32->e8m0 cast, which would
//    round to nearest). A zero or subnormal amax clamps to code 0. The upper
//    clamp cannot bind for float32 inputs (emax >= 2 keeps codes <= 252).
//  - rceil (cuBLAS/torchao RCEIL, API.md 7): d = amax / max_elem in float32
//    (IEEE division, round to nearest even), then X = the smallest power of
//    two >= d, clamped to [2^-127, 2^127]: code = exponent field + (any
//    mantissa bit set), so 1.125 * 2^k rounds up to 2^(k+1).
//  - a NaN or Inf anywhere in a block makes its scale 0xFF (NaN); that
//    block's element codes are all zero.
// Elements: x / X rounded to nearest, ties to even, on the element grid
// (subnormals included), saturating to +-max; the sign is kept (-0 too).
// x / X is exact arithmetic on the float32 exponent (X is a power of two),
// so there is no double rounding.
//
// Packing (every 1-D fiber along the block axis is one little-endian bit
// stream): element i occupies stream bits [i*b, i*b + b), its code's bit 0
// first; stream bit n is bit (n % 8) of byte n / 8. So FP8 is one code per
// byte; FP4 puts element 2j in the low nibble of byte j and 2j+1 in the high
// nibble; FP6 packs elements 4j..4j+3 into bytes 3j..3j+2 as the 24-bit
// little-endian word c0 | c1 << 6 | c2 << 12 | c3 << 18.
//
// Device note: the rounding uses a float32 multiply by 2^-k and, below the
// element format's normal range, a float32 add; both must be IEEE (no
// flush-to-zero, no fast-math), as nvcc's defaults and the host build are.
#pragma once

#include <cstdint>

#include "ops/kernels/common.h"
#include "ops/kernels/float_conv.h"

namespace tensord::kernels {

enum class MxFormat : uint8_t { kFp8E4M3, kFp8E5M2, kFp6E2M3, kFp6E3M2, kFp4E2M1 };
inline constexpr int kNumMxFormats = 5;

enum class MxScaleRounding : uint8_t { kFloor, kRceil };

inline constexpr uint8_t kE8M0Nan = 0xffu;

struct MxElemSpec {
  int bits;           // code width, sign included: 8, 6 or 4
  int mbits;          // mantissa bits
  int bias;           // exponent bias
  int emax;           // exponent of the largest normal (OCP emax_elem)
  uint32_t max_code;  // magnitude code of the largest finite value
  float max_value;    // the largest finite value
  int group_elems;    // elements per packed group: 1 (FP8), 4 (FP6), 2 (FP4)
  int group_bytes;    // bytes per packed group: 1, 3, 1
  bool has_nan;       // e4m3 magnitude 0x7F is NaN
  bool has_inf;       // e5m2 magnitude 0x7C is inf, above it NaN
};

TENSORD_INLINE constexpr MxElemSpec mx_spec(MxFormat f) {
  switch (f) {
    case MxFormat::kFp8E4M3:
      return {8, 3, 7, 8, 0x7eu, 448.0f, 1, 1, true, false};
    case MxFormat::kFp8E5M2:
      return {8, 2, 15, 15, 0x7bu, 57344.0f, 1, 1, true, true};
    case MxFormat::kFp6E2M3:
      return {6, 3, 1, 2, 0x1fu, 7.5f, 4, 3, false, false};
    case MxFormat::kFp6E3M2:
      return {6, 2, 3, 4, 0x1fu, 28.0f, 4, 3, false, false};
    case MxFormat::kFp4E2M1:
    default:
      return {4, 1, 1, 2, 0x7u, 6.0f, 2, 1, false, false};
  }
}

// ---- block scale ----
// `amax_bits`: the float32 bits of the block's largest |x| (sign clear); a
// value >= 0x7f800000 (inf or NaN: take the max of the bit patterns) gives
// NaN. Returns the e8m0 code.
TENSORD_INLINE uint8_t mx_scale_floor(uint32_t amax_bits, const MxElemSpec& s) {
  if (amax_bits >= 0x7f800000u) return kE8M0Nan;
  // biased: (efield - 127) - emax + 127; efield 0 (zero, subnormal) clamps.
  const int code = static_cast<int>(amax_bits >> 23) - s.emax;
  return static_cast<uint8_t>(code < 0 ? 0 : (code > 254 ? 254 : code));
}

TENSORD_INLINE uint8_t mx_scale_rceil(uint32_t amax_bits, const MxElemSpec& s) {
  if (amax_bits >= 0x7f800000u) return kE8M0Nan;
  const uint32_t d = f32_bits(f32_from_bits(amax_bits) / s.max_value);
  const uint32_t e = d >> 23;
  const uint32_t m = d & 0x7fffffu;
  if (e == 0) return m > 0x400000u ? 1u : 0u;  // subnormal d: (2^-127, 2^-126) -> 2^-126, else 2^-127
  const uint32_t code = e + (m != 0 ? 1u : 0u);
  return static_cast<uint8_t>(code > 254u ? 254u : code);
}

TENSORD_INLINE uint8_t mx_scale(uint32_t amax_bits, const MxElemSpec& s, MxScaleRounding r) {
  return r == MxScaleRounding::kFloor ? mx_scale_floor(amax_bits, s) : mx_scale_rceil(amax_bits, s);
}

// 2^-(code - 127) as a float32, the factor that divides by the scale
// (code in [0, 254]; 2^127 .. 2^-127, the last one subnormal).
TENSORD_INLINE float mx_inv_scale(uint8_t code) {
  const int e = 127 - (static_cast<int>(code) - 127);  // biased exponent of 2^-(code-127)
  return e > 0 ? f32_from_bits(static_cast<uint32_t>(e) << 23) : f32_from_bits(0x00400000u);
}

// ---- elements ----
// The element code of x * inv_scale (x finite; inv_scale from mx_inv_scale):
// round to nearest even on the element grid, saturate to +-max, keep the sign.
// Branch-free, so the CPU loops vectorise.
TENSORD_INLINE uint32_t mx_encode(float x, float inv_scale, const MxElemSpec& s) {
  const uint32_t xb = f32_bits(x);
  const uint32_t sign = (xb >> 31) << (s.bits - 1);
  // Exact: a power-of-two factor; a result below 2^-126 (inexact) is far
  // below half the element's smallest subnormal (>= 2^-17) and encodes 0.
  const float y = f32_from_bits(xb & 0x7fffffffu) * inv_scale;
  const uint32_t yb = f32_bits(y);
  const int emin = 1 - s.bias;
  // Normal range: round the float32 mantissa to mbits, RNE, and rebias.
  const uint32_t shift = static_cast<uint32_t>(23 - s.mbits);
  const uint32_t rounded = (yb + ((1u << (shift - 1)) - 1u) + ((yb >> shift) & 1u)) >> shift;
  const uint32_t normal = rounded - (static_cast<uint32_t>(127 + emin - 1) << s.mbits);
  // Below 2^emin: adding 2^(emin - mbits + 23) rounds at the subnormal unit.
  const float magic = f32_from_bits(static_cast<uint32_t>(127 + emin - s.mbits + 23) << 23);
  const uint32_t sub = f32_bits(y + magic) - f32_bits(magic);
  const bool is_sub = yb < (static_cast<uint32_t>(127 + emin) << 23);
  uint32_t code = is_sub ? sub : normal;
  code = code > s.max_code ? s.max_code : code;
  return sign | code;
}

// The value of an element code (unscaled). e4m3's NaN and e5m2's inf/NaN
// codes decode as such (they only come from data that was not quantized here).
TENSORD_INLINE float mx_decode(uint32_t code, const MxElemSpec& s) {
  const uint32_t mag = code & ((1u << (s.bits - 1)) - 1u);
  const bool neg = (code >> (s.bits - 1)) & 1u;
  float v;
  if (s.has_inf && mag >= 0x7cu) {
    v = mag == 0x7cu ? f32_from_bits(0x7f800000u) : f32_from_bits(0x7fc00000u);
  } else if (s.has_nan && !s.has_inf && mag == 0x7fu) {
    v = f32_from_bits(0x7fc00000u);
  } else {
    const uint32_t e = mag >> s.mbits;
    const uint32_t m = mag & ((1u << s.mbits) - 1u);
    if (e == 0) {  // m * 2^(1 - bias - mbits)
      v = static_cast<float>(m) * f32_from_bits(static_cast<uint32_t>(127 + 1 - s.bias - s.mbits) << 23);
    } else {
      v = f32_from_bits((static_cast<uint32_t>(static_cast<int>(e) - s.bias + 127) << 23) | (m << (23 - s.mbits)));
    }
  }
  return neg ? -v : v;
}

// The dequantized value: element value times the scale (exact in float32
// unless it overflows: the element values have at most 4 significant bits
// and their smallest unit times 2^-127 is >= 2^-149). A NaN scale gives NaN.
TENSORD_INLINE float mx_dequantize_one(uint32_t code, uint8_t scale, const MxElemSpec& s) {
  return mx_decode(code, s) * e8m0_to_f32(scale);
}

// ---- packing ----
// One group (group_elems codes <-> group_bytes bytes), bytes `stride` apart.
TENSORD_INLINE void mx_pack_group(const uint32_t* codes, const MxElemSpec& s, uint8_t* out, int64_t stride) {
  if (s.bits == 8) {
    out[0] = static_cast<uint8_t>(codes[0]);
  } else if (s.bits == 4) {
    out[0] = static_cast<uint8_t>((codes[0] & 0xfu) | ((codes[1] & 0xfu) << 4));
  } else {
    const uint32_t w =
        (codes[0] & 0x3fu) | ((codes[1] & 0x3fu) << 6) | ((codes[2] & 0x3fu) << 12) | ((codes[3] & 0x3fu) << 18);
    out[0] = static_cast<uint8_t>(w);
    out[stride] = static_cast<uint8_t>(w >> 8);
    out[2 * stride] = static_cast<uint8_t>(w >> 16);
  }
}

TENSORD_INLINE void mx_unpack_group(const uint8_t* in, int64_t stride, const MxElemSpec& s, uint32_t* codes) {
  if (s.bits == 8) {
    codes[0] = in[0];
  } else if (s.bits == 4) {
    codes[0] = in[0] & 0xfu;
    codes[1] = in[0] >> 4;
  } else {
    const uint32_t w = static_cast<uint32_t>(in[0]) | (static_cast<uint32_t>(in[stride]) << 8) |
                       (static_cast<uint32_t>(in[2 * stride]) << 16);
    codes[0] = w & 0x3fu;
    codes[1] = (w >> 6) & 0x3fu;
    codes[2] = (w >> 12) & 0x3fu;
    codes[3] = (w >> 18) & 0x3fu;
  }
}

}  // namespace tensord::kernels
