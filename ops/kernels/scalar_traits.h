// Per-dtype storage type and the type arithmetic is done in. Narrow floats
// (float16, bfloat16, float8) compute in float and round on store, exactly
// as PyTorch's CPU kernels do.
#pragma once

#include <complex>
#include <cstdint>

#include "ops/dtype.h"
#include "ops/kernels/float_conv.h"

namespace tensord::kernels {

template <class T>
struct ScalarTraits {
  using compute_t = T;
  static TENSORD_INLINE compute_t load(T v) { return v; }
  static TENSORD_INLINE T store(compute_t v) { return v; }
};
template <>
struct ScalarTraits<Half> {
  using compute_t = float;
  static TENSORD_INLINE float load(Half v) { return f16_to_f32(v.bits); }
  static TENSORD_INLINE Half store(float v) { return Half{f32_to_f16(v)}; }
};
template <>
struct ScalarTraits<BFloat16> {
  using compute_t = float;
  static TENSORD_INLINE float load(BFloat16 v) { return bf16_to_f32(v.bits); }
  static TENSORD_INLINE BFloat16 store(float v) { return BFloat16{f32_to_bf16(v)}; }
};
template <>
struct ScalarTraits<Float8E4M3FN> {
  using compute_t = float;
  static TENSORD_INLINE float load(Float8E4M3FN v) { return e4m3fn_to_f32(v.bits); }
  static TENSORD_INLINE Float8E4M3FN store(float v) { return Float8E4M3FN{f32_to_e4m3fn(v)}; }
};
template <>
struct ScalarTraits<Float8E5M2> {
  using compute_t = float;
  static TENSORD_INLINE float load(Float8E5M2 v) { return e5m2_to_f32(v.bits); }
  static TENSORD_INLINE Float8E5M2 store(float v) { return Float8E5M2{f32_to_e5m2(v)}; }
};
template <>
struct ScalarTraits<Float8E8M0FNU> {
  using compute_t = float;
  static TENSORD_INLINE float load(Float8E8M0FNU v) { return e8m0_to_f32(v.bits); }
  static TENSORD_INLINE Float8E8M0FNU store(float v) { return Float8E8M0FNU{f32_to_e8m0(v)}; }
};

}  // namespace tensord::kernels
