// A contiguous tensor seen as [outer, len, inner] around one dim: how
// collectives along a dim other than 0 pack their parts into contiguous
// blocks and unpack what they received.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/shape.h"

namespace tensord::dist {

struct DimLayout {
  int64_t outer = 1;     // product of the extents before dim
  int64_t len = 0;       // the extent of dim
  int64_t inner = 1;     // product of the extents after dim
  size_t elem_size = 1;  // bytes per element

  DimLayout(const Shape& shape, int64_t dim, size_t elem_size);
  // Bytes of `count` slices along dim, all outer blocks together.
  size_t block_bytes(int64_t count) const;
};

// Copies slices [start, start + count) along dim of `src` (laid out as `l`)
// into the contiguous block `dst` ([outer, count, inner]).
void copy_slices_out(const void* src, const DimLayout& l, int64_t start, int64_t count, void* dst);
// Copies the contiguous block `src` ([outer, count, inner]) into slices
// [start, start + count) along dim of `dst` (laid out as `l`).
void copy_slices_in(const void* src, const DimLayout& l, int64_t start, int64_t count, void* dst);

}  // namespace tensord::dist
