// Bulk float16 / bfloat16 <-> float32 conversion for the CPU loops. float16: F16C instructions
// when the CPU has them (checked once at run time), else the bit-exact
// scalar code of ops/kernels/float_conv.h. Both round to nearest even and
// give identical bits (tests/unit/ops/elementwise_test.cpp checks all
// 65536 halves and a sweep of floats).
#pragma once

#include <cstdint>

namespace tensord::cpu {

void f16_to_f32_n(const uint16_t* src, float* dst, int64_t n);
void f32_to_f16_n(const float* src, uint16_t* dst, int64_t n);

// bfloat16: plain loops the compiler vectorises (same bits as
// kernels::bf16_to_f32 / f32_to_bf16).
void bf16_to_f32_n(const uint16_t* src, float* dst, int64_t n);
void f32_to_bf16_n(const float* src, uint16_t* dst, int64_t n);

// Whether the F16C path is in use (for tests and benchmarks).
bool have_f16c();

}  // namespace tensord::cpu
