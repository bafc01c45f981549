// The MX quantize loops on AVX2 (ops/cpu/mx_quantize_avx2.cpp, built with
// -mavx2 -mfma -mf16c): the arithmetic of ops/kernels/mx.h, 8 float32 lanes
// at a time, bit for bit (tests/unit/ops/mx_avx2_test.cpp compares it with
// the portable loop). ops/cpu/mx_loop.cpp calls them when
// mx_avx2_supported() and handles what they do not (block sizes that are not
// a multiple of 32 along a contiguous axis, column tails of fewer than 8).
#pragma once

#include <cstdint>

#include "ops/kernels/mx.h"

namespace tensord {

enum class MxInput : uint8_t { kFloat32, kFloat16, kBFloat16 };

// CPUID reports AVX2, FMA and F16C (false off x86-64); defined in the
// portable ops/cpu/mx_loop.cpp.
bool mx_avx2_supported();

// `nblocks` blocks of `block` (a multiple of 32) consecutive inputs at x:
// their packed codes to q (block * bits / 8 bytes each, in order) and their
// e8m0 codes to sc[0 .. nblocks).
void mx_quantize_blocks_avx2(MxInput in, kernels::MxFormat f, kernels::MxScaleRounding r, const void* x, int64_t block,
                             int64_t nblocks, uint8_t* q, uint8_t* sc);

// One block along a non-contiguous axis over `ncols` (a multiple of 8)
// adjacent columns: input row i (i < block) at x + i * inner elements, packed
// byte row k at q + k * inner, the ncols scale codes at sc.
void mx_quantize_cols_avx2(MxInput in, kernels::MxFormat f, kernels::MxScaleRounding r, const void* x, int64_t inner,
                           int64_t block, int64_t ncols, uint8_t* q, uint8_t* sc);

}  // namespace tensord
