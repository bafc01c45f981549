// Shapes: element counts with overflow checks, broadcasting, dim wrapping.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tensord {

using Shape = std::vector<int64_t>;

// Largest element count a tensor may have (2^48): keeps byte sizes and index
// arithmetic far from int64 overflow. Bigger shapes are invalid_argument.
inline constexpr int64_t kMaxNumel = int64_t{1} << 48;
inline constexpr size_t kMaxRank = 16;

// Product of dims; throws invalid_argument on negative dims, rank > 16 or a
// count over kMaxNumel.
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3]"

// Broadcast two shapes as PyTorch does; throws shape_mismatch naming `op`.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Wraps a possibly negative dim into [0, rank); throws invalid_argument.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* op);

// Row-major contiguous strides in elements.
std::vector<int64_t> contiguous_strides(const Shape& s);

}  // namespace tensord
