#include "ops/dist/dim_layout.h"

#include <cstring>

namespace tensord::dist {

DimLayout::DimLayout(const Shape& shape, int64_t dim, size_t elem) : elem_size(elem) {
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    const int64_t e = shape[static_cast<size_t>(i)];
    if (i < dim) outer *= e;
    if (i == dim) len = e;
    if (i > dim) inner *= e;
  }
}

size_t DimLayout::block_bytes(int64_t count) const {
  return static_cast<size_t>(outer * count * inner) * elem_size;
}

void copy_slices_out(const void* src, const DimLayout& l, int64_t start, int64_t count, void* dst) {
  const size_t row = static_cast<size_t>(l.inner) * l.elem_size;
  const auto* s = static_cast<const char*>(src);
  auto* d = static_cast<char*>(dst);
  for (int64_t o = 0; o < l.outer; ++o) {
    std::memcpy(d + static_cast<size_t>(o * count) * row, s + static_cast<size_t>(o * l.len + start) * row,
                static_cast<size_t>(count) * row);
  }
}

void copy_slices_in(const void* src, const DimLayout& l, int64_t start, int64_t count, void* dst) {
  const size_t row = static_cast<size_t>(l.inner) * l.elem_size;
  const auto* s = static_cast<const char*>(src);
  auto* d = static_cast<char*>(dst);
  for (int64_t o = 0; o < l.outer; ++o) {
    std::memcpy(d + static_cast<size_t>(o * l.len + start) * row, s + static_cast<size_t>(o * count) * row,
                static_cast<size_t>(count) * row);
  }
}

}  // namespace tensord::dist
