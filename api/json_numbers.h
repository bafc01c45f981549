// A JSON tensor body whose "data" is plain numbers, parsed in one pass
// straight into the tensor: no DOM of millions of values and no
// walk over it afterwards. The body's JSON around the array is parsed as
// usual (a few dozen bytes); the array's numbers are read by the same
// rules the DOM path applies (RapidJSON's number grammar, integral
// literals through 64-bit integers, the rest through std::from_chars, then
// the dtype's cast), so the tensor is the one the DOM path would build.
//
// Only the simple case is taken: a top-level object with "dtype" float32 or
// float64, an optional "shape", an optional "name", and "data" either flat
// or nested exactly along the shape, every element a JSON number literal.
// Anything else (another dtype or key, a bool, a "nan" string, a shape
// mismatch, an out-of-range literal, malformed JSON) returns nullopt and
// the caller parses the body as before, so every error message stays the
// DOM path's.
#pragma once

#include <optional>
#include <string_view>

#include "ops/tensor.h"

namespace tensord {

std::optional<Tensor> numeric_tensor_fast(std::string_view body);

}  // namespace tensord
