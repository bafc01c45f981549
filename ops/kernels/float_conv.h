// Bit-exact conversions between float32 and the narrow floating formats.
// All are round-to-nearest-even. Choices where PyTorch/OCP leave room:
//  - float8_e4m3fn (bias 7, no inf, NaN = S.1111.111): finite overflow and
//    +-inf saturate to +-448 (OCP "saturating" mode); NaN stays NaN.
//  - float8_e5m2 (bias 15, IEEE-like): finite overflow saturates to +-57344,
//    +-inf stays +-inf, NaN stays NaN.
//  - float8_e8m0fnu (exponent only, 2^(e-127), 0xFF = NaN): the sign is
//    dropped, the mantissa rounds to nearest even on the exponent; NaN, inf
//    and overflow give 0xFF; zero gives 0x00 (2^-127, e8m0 has no zero);
//    ties round up, as c10::Float8_e8m0fnu does.
#pragma once

#include <cstdint>
#include <cstring>

#include "ops/kernels/common.h"

namespace tensord::kernels {

TENSORD_INLINE uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
TENSORD_INLINE float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// ---- bfloat16 ----
TENSORD_INLINE uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return static_cast<uint16_t>(u >> 16);
}
TENSORD_INLINE float bf16_to_f32(uint16_t h) {
  return f32_from_bits(static_cast<uint32_t>(h) << 16);
}

// ---- float16 (IEEE binary16) ----
TENSORD_INLINE uint16_t f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow (>= 65520) -> inf
  if (a < 0x38800000u) {                                               // subnormal or zero in half
    if (a < 0x33000000u) return static_cast<uint16_t>(sign);           // < 2^-25: rounds to 0
    uint32_t exp = a >> 23;
    uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exp;  // 14 + (113 - exp) ... value = mant * 2^(exp-150)
    // half subnormal unit is 2^-24: result = mant * 2^(exp-150+24) = mant >> (126-exp)
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  // normal: rebias exponent 127 -> 15, round mantissa 23 -> 10 bits
  uint32_t lsb = (a >> 13) & 1u;
  a += 0xfffu + lsb;
  a -= (112u << 23);
  return static_cast<uint16_t>(sign | (a >> 13));
}
TENSORD_INLINE float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return f32_from_bits(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return f32_from_bits(sign);
    // subnormal: mant * 2^-24
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

// ---- generic small float encoder (used by the float8 formats and MX) ----
// Encodes |x| (finite, non-NaN) into a format with `ebits` exponent bits,
// `mbits` mantissa bits and bias `bias`, RNE, with subnormals. Returns the
// unsigned code; `max_code` is the largest finite code (saturation target).
TENSORD_INLINE uint32_t encode_small_float(float ax, int mbits, int bias, uint32_t max_code) {
  uint32_t u = f32_bits(ax);
  if (u == 0) return 0;
  int e = static_cast<int>(u >> 23) - 127;
  uint32_t m = u & 0x7fffffu;
  if ((u >> 23) == 0) {  // float32 subnormal: far below any small format's range
    return 0;
  }
  const int emin = 1 - bias;                            // smallest normal exponent
  uint64_t sig = static_cast<uint64_t>(m | 0x800000u);  // 24-bit significand, value sig*2^(e-23)
  int shift;                                            // how many low bits of sig to drop
  uint32_t ebiased;
  if (e < emin) {  // subnormal in target: unit is 2^(emin - mbits)
    shift = 23 - mbits + (emin - e);
    ebiased = 0;
  } else {
    shift = 23 - mbits;
    ebiased = static_cast<uint32_t>(e - emin + 1);
  }
  if (shift > 40) return 0;
  uint64_t q = sig >> shift;
  uint64_t rem = sig & ((uint64_t{1} << shift) - 1u);
  uint64_t halfway = uint64_t{1} << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
  uint64_t code;
  if (ebiased == 0) {
    code = q;  // may carry into the first normal exponent, which is correct
  } else {
    // q has the implicit bit at position mbits; carry may bump exponent
    if (q >> (mbits + 1)) {
      q >>= 1;
      ++ebiased;
    }
    code = (static_cast<uint64_t>(ebiased) << mbits) | (q & ((uint64_t{1} << mbits) - 1u));
  }
  if (code > max_code) code = max_code;
  return static_cast<uint32_t>(code);
}

// Decodes an unsigned small-float code (no NaN/inf handling) to float.
TENSORD_INLINE float decode_small_float(uint32_t code, int mbits, int bias) {
  uint32_t e = code >> mbits;
  uint32_t m = code & ((1u << mbits) - 1u);
  if (e == 0) {
    // subnormal: m * 2^(1 - bias - mbits)
    return static_cast<float>(m) * f32_from_bits(static_cast<uint32_t>(127 + 1 - bias - mbits) << 23);
  }
  int ex = static_cast<int>(e) - bias;
  return f32_from_bits(static_cast<uint32_t>(ex + 127) << 23 | (m << (23 - mbits)));
}

// ---- float8_e4m3fn ----
TENSORD_INLINE uint8_t f32_to_e4m3fn(float f) {
  uint32_t u = f32_bits(f);
  uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
  if (a == 0x7f800000u) return static_cast<uint8_t>(sign | 0x7eu);  // saturate inf
  return static_cast<uint8_t>(sign | encode_small_float(f32_from_bits(a), 3, 7, 0x7eu));
}
TENSORD_INLINE float e4m3fn_to_f32(uint8_t b) {
  uint32_t code = b & 0x7fu;
  if (code == 0x7fu) return f32_from_bits(0x7fc00000u);
  float v = decode_small_float(code, 3, 7);
  return (b & 0x80u) ? -v : v;
}

// ---- float8_e5m2 ----
TENSORD_INLINE uint8_t f32_to_e5m2(float f) {
  uint32_t u = f32_bits(f);
  uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
  if (a == 0x7f800000u) return static_cast<uint8_t>(sign | 0x7cu);
  return static_cast<uint8_t>(sign | encode_small_float(f32_from_bits(a), 2, 15, 0x7bu));
}
TENSORD_INLINE float e5m2_to_f32(uint8_t b) {
  uint32_t code = b & 0x7fu;
  float v;
  if (code > 0x7cu) {
    v = f32_from_bits(0x7fc00000u);
  } else if (code == 0x7cu) {
    v = f32_from_bits(0x7f800000u);
  } else {
    v = decode_small_float(code, 2, 15);
  }
  return (b & 0x80u) ? -v : v;
}

// ---- float8_e8m0fnu ----
TENSORD_INLINE uint8_t f32_to_e8m0(float f) {
  uint32_t a = f32_bits(f) & 0x7fffffffu;
  if (a >= 0x7f800000u) return 0xffu;
  uint32_t e = a >> 23;
  uint32_t m = a & 0x7fffffu;
  // As PyTorch's c10::Float8_e8m0fnu: RNE where the "lsb" is the implicit
  // mantissa bit (1 for normals, 0 for subnormals), so a normal input rounds
  // up iff its mantissa is >= 0.5, a subnormal one iff it is > 2^-127.
  bool guard = (m & 0x400000u) != 0;
  bool sticky = (m & 0x3fffffu) != 0;
  if (e == 0) return (guard && sticky) ? 1u : 0u;
  if (guard) ++e;
  if (e >= 0xffu) return 0xffu;
  return static_cast<uint8_t>(e);
}
TENSORD_INLINE float e8m0_to_f32(uint8_t b) {
  if (b == 0xffu) return f32_from_bits(0x7fc00000u);
  if (b == 0) return f32_from_bits(0x00400000u);  // 2^-127 (float32 subnormal)
  return f32_from_bits(static_cast<uint32_t>(b) << 23);
}

}  // namespace tensord::kernels
