// The index of getitem (basic slicing, as Python's x[...] on a tensor).
//
// Wire format: a string in numpy's subscript syntax, the text between the
// brackets of x[...]: comma-separated items, each one of
//   an integer      "2", "-1"        selects one position, removes the dim
//   a slice         "1:3", "::2", "-3:", ":-1:2"   start:stop[:step], any
//                   part may be omitted; step > 0; bounds clamp like Python
//   an ellipsis     "..."            as many full slices as needed (at most one)
//   a new axis      "None"           inserts a dim of size 1
// Whitespace around items is ignored; "" indexes nothing (x[()]) and a
// trailing comma is allowed ("0," is x[0,]). Dims after the last item are
// kept whole. Examples: "0, 1:3", "..., ::2", "None, :, -1".
// For convenience the attr may also be an int ("select dim 0") or a list of
// ints (select the leading dims): 2 == "2", [1, -1] == "1, -1".
// Errors are invalid_argument: a syntax error, more than one ellipsis, more
// indexed dims than the tensor has, an integer out of range, step <= 0.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ops/attr.h"
#include "ops/shape.h"

namespace tensord {

struct IndexItem {
  enum class Kind { kInt, kSlice, kEllipsis, kNewAxis };
  Kind kind = Kind::kInt;
  int64_t index = 0;  // kInt
  bool has_start = false, has_stop = false, has_step = false;
  int64_t start = 0, stop = 0, step = 1;  // kSlice
};

std::vector<IndexItem> parse_index(std::string_view text);
// The items of a getitem index attr (string, int or int list).
std::vector<IndexItem> index_from_attr(const Attr& a);

// The view an index selects from a contiguous tensor of `shape`: its shape,
// element strides into the source, and the element offset of its first
// element.
struct IndexedView {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};
IndexedView apply_index(const std::vector<IndexItem>& items, const Shape& shape);

}  // namespace tensord
