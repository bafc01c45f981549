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

// x: float32, float16 or bfloat16 in the logical shape. elements: uint8
// packed along the axis (len * bits / 8 per fiber); scale: e8m0 codes
// (nblocks per fiber).
void mx_quantize_cpu(const OpContext& ctx, const Tensor& x, kernels::MxFormat f, kernels::MxScaleRounding r,
                     const MxLayout& l, Tensor& elements, Tensor& scale);

// out: float32 in the logical shape.
void mx_dequantize_cpu(const OpContext& ctx, const Tensor& elements, const Tensor& scale, kernels::MxFormat f,
                       const MxLayout& l, Tensor& out);

}  // namespace tensord
