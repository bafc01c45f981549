#include "ops/cpu/half_simd.h"

#include <cstring>

#include "ops/kernels/float_conv.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define TENSORD_X86_F16C 1
#endif

namespace tensord::cpu {
namespace {

void f16_to_f32_scalar(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = kernels::f16_to_f32(src[i]);
}
void f32_to_f16_scalar(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = kernels::f32_to_f16(src[i]);
}

#ifdef TENSORD_X86_F16C
__attribute__((target("avx,f16c"))) void f16_to_f32_f16c(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  f16_to_f32_scalar(src + i, dst + i, n - i);
}
__attribute__((target("avx,f16c"))) void f32_to_f16_f16c(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  f32_to_f16_scalar(src + i, dst + i, n - i);
}
// F16C through CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports
// does not know "f16c" (make fuzz builds with clang). "avx" also checks that
// the OS saves the YMM registers.
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
const bool kHaveF16C = cpu_has_f16c();
#else
const bool kHaveF16C = false;
#endif

}  // namespace

bool have_f16c() {
  return kHaveF16C;
}

void f16_to_f32_n(const uint16_t* src, float* dst, int64_t n) {
#ifdef TENSORD_X86_F16C
  if (kHaveF16C) return f16_to_f32_f16c(src, dst, n);
#endif
  f16_to_f32_scalar(src, dst, n);
}

void f32_to_f16_n(const float* src, uint16_t* dst, int64_t n) {
#ifdef TENSORD_X86_F16C
  if (kHaveF16C) return f32_to_f16_f16c(src, dst, n);
#endif
  f32_to_f16_scalar(src, dst, n);
}

void bf16_to_f32_n(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(dst + i, &u, 4);
  }
}

void f32_to_bf16_n(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + i, 4);
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    dst[i] = static_cast<uint16_t>(nan ? ((u >> 16) | 0x40u) : rounded);
  }
}

}  // namespace tensord::cpu
