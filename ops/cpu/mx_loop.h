// CPU loops of the MX ops (ops/cpu/mx.cpp): quantize and dequantize over
// blocks, split over the context's pool. Arithmetic: ops/kernels/mx.h.
#pragma once

#include <cstdint>

#include "ops/kernels/mx.h"
#include "ops/op_registry.h"
#include "ops/tensor.h"

namespace tensord {

// A tensor seen as [outer, len, inner] around the block axis, with blocks of
// `block` along len.
struct MxLayout {
  int64_t outer = 1;
  int64_t len = 0;  // logical elements along the axis
  int64_t inner = 1;
  int64_t block = 32;
  int64_t nblocks() const { return block > 0 ? len / block : 0; }
};

// The quantize loop's instruction set: the portable loop, or the AVX2 one
// (ops/cpu/mx_quantize_avx2.h; bit-identical) where the CPU has it.
enum class MxIsa : uint8_t { kPortable, kAvx2 };
// AVX2 when CPUID reports AVX2 + FMA + F16C and TENSORD_CPU_ISA is not
// "portable" / "scalar" (read once); else portable.
MxIsa mx_default_isa();

struct MxMeta;
// The layout of an MX tensor's description (ops/mx_tensor.h).
MxLayout mx_layout_of(const MxMeta& m);

// x: float32, float16 or bfloat16 in the logical shape. elements: uint8
// packed along the axis (len * bits / 8 per fiber); scale: e8m0 codes
// (nblocks per fiber). `isa` kAvx2 on a CPU without it runs the portable loop.
void mx_quantize_cpu(const OpContext& ctx, const Tensor& x, kernels::MxFormat f, kernels::MxScaleRounding r,
                     const MxLayout& l, Tensor& elements, Tensor& scale, MxIsa isa = mx_default_isa());

// Logical elements [start, start + count) (row-major in the logical shape)
// of packed elements q and scales sc laid out as `l`, dequantized into
// out[0, count): the same values as mx_dequantize_cpu. Serial; for kernels
// that dequantize a panel at a time (matmul with an MX operand).
void mx_dequantize_range(const uint8_t* q, const uint8_t* sc, kernels::MxFormat f, const MxLayout& l, int64_t start,
                         int64_t count, float* out);

// out: float32 in the logical shape.
void mx_dequantize_cpu(const OpContext& ctx, const Tensor& elements, const Tensor& scale, kernels::MxFormat f,
                       const MxLayout& l, Tensor& out);

}  // namespace tensord
