// Gathers a strided view of host memory into a contiguous buffer: the one
// data-movement kernel behind permute, transpose and getitem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/shape.h"

namespace tensord {

struct OpContext;

// Writes element (i0, ..., ik) of the view, found at
// src + (sum_d i_d * strides[d]) * elem_size, to dst in row-major order.
// Strides are in elements and may be zero (broadcast) but not negative;
// elem_size is 1, 2, 4, 8 or 16. Parallel over ctx's pool; a transposing
// view is copied in cache-sized tiles.
void strided_copy(const OpContext& ctx, const void* src, size_t elem_size, const Shape& shape,
                  const std::vector<int64_t>& strides, void* dst);

}  // namespace tensord
