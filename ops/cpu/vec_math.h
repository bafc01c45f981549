// Bulk float32 exp, tanh and sigmoid for the CPU loops. Each value is
// computed in double (range reduction + a degree-12 polynomial, error far
// below a float ulp) and rounded once, so results are the correctly rounded
// float in all but vanishingly rare cases: same as glibc's expf, and as
// accurate or more than PyTorch's 1-ulp vectorised versions. The loops
// vectorise (an AVX2 version is picked at run time where the CPU has it);
// no FMA contraction, so both versions give the same bits.
#pragma once

#include <cstdint>

namespace tensord::cpu {

void exp_f32_n(const float* src, float* dst, int64_t n);
void tanh_f32_n(const float* src, float* dst, int64_t n);
void sigmoid_f32_n(const float* src, float* dst, int64_t n);

}  // namespace tensord::cpu
