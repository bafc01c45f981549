#include "ops/cpu/vec_math.h"

#include <cmath>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// Floating-point exceptions are not observed here; without trapping math
// GCC if-converts the clamps and NaN selects and vectorises the loops.
#pragma GCC optimize("no-trapping-math")
#define TENSORD_VEC_AVX2 1
#endif

namespace tensord::cpu {
namespace {

constexpr double kLog2e = 1.4426950408889634074;
constexpr double kLn2 = 0.69314718055994530942;
constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer

// e^x for x in [-708, 708] (callers clamp; NaN handled by callers).
// x = n ln2 + r, |r| <= ln2/2; e^r by Taylor to degree 12 (remainder
// < 2e-16 relative); 2^n built in the exponent bits from the rounding trick.
__attribute__((always_inline)) inline double exp_core(double x) {
  const double t = x * kLog2e + kMagic;
  const double n = t - kMagic;
  const double r = x - n * kLn2;
  double p = 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  uint64_t bits;
  std::memcpy(&bits, &t, 8);
  const uint64_t sbits = (bits + 1023u) << 52;  // low bits of t hold n
  double scale;
  std::memcpy(&scale, &sbits, 8);
  return p * scale;
}

__attribute__((always_inline)) inline double clampd(double x, double lo, double hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}

__attribute__((always_inline)) inline void exp_loop(const float* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float xf = src[i];
    const float y = static_cast<float>(exp_core(clampd(xf, -110.0, 100.0)));
    dst[i] = xf != xf ? xf : y;
  }
}

__attribute__((always_inline)) inline void sigmoid_loop(const float* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float xf = src[i];
    const double e = exp_core(clampd(-static_cast<double>(xf), -200.0, 200.0));
    const float y = static_cast<float>(1.0 / (1.0 + e));
    dst[i] = xf != xf ? xf : y;
  }
}

__attribute__((always_inline)) inline void tanh_loop(const float* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float xf = src[i];
    const double ax = clampd(std::fabs(static_cast<double>(xf)), 0.0, 20.0);
    // |x| < 1/16: the odd series to x^13 (remainder < 1e-16 relative);
    // else (e^2|x| - 1) / (e^2|x| + 1), whose cancellation costs < 1e-14.
    const double x2 = ax * ax;
    double poly = 21844.0 / 6081075.0;
    poly = poly * x2 - 1382.0 / 155925.0;
    poly = poly * x2 + 62.0 / 2835.0;
    poly = poly * x2 - 17.0 / 315.0;
    poly = poly * x2 + 2.0 / 15.0;
    poly = poly * x2 - 1.0 / 3.0;
    poly = poly * x2 + 1.0;
    const double small = ax * poly;
    const double e = exp_core(2.0 * ax);
    const double big = (e - 1.0) / (e + 1.0);
    const double t = ax < 0.0625 ? small : big;
    const float y = static_cast<float>(std::copysign(t, static_cast<double>(xf)));
    dst[i] = xf != xf ? xf : y;
  }
}

#ifdef TENSORD_VEC_AVX2
__attribute__((target("avx2"))) void exp_avx2(const float* s, float* d, int64_t n) {
  exp_loop(s, d, n);
}
__attribute__((target("avx2"))) void sigmoid_avx2(const float* s, float* d, int64_t n) {
  sigmoid_loop(s, d, n);
}
__attribute__((target("avx2"))) void tanh_avx2(const float* s, float* d, int64_t n) {
  tanh_loop(s, d, n);
}
const bool kHaveAvx2 = __builtin_cpu_supports("avx2");
#endif

}  // namespace

void exp_f32_n(const float* src, float* dst, int64_t n) {
#ifdef TENSORD_VEC_AVX2
  if (kHaveAvx2) return exp_avx2(src, dst, n);
#endif
  exp_loop(src, dst, n);
}

void sigmoid_f32_n(const float* src, float* dst, int64_t n) {
#ifdef TENSORD_VEC_AVX2
  if (kHaveAvx2) return sigmoid_avx2(src, dst, n);
#endif
  sigmoid_loop(src, dst, n);
}

void tanh_f32_n(const float* src, float* dst, int64_t n) {
#ifdef TENSORD_VEC_AVX2
  if (kHaveAvx2) return tanh_avx2(src, dst, n);
#endif
  tanh_loop(src, dst, n);
}

}  // namespace tensord::cpu
