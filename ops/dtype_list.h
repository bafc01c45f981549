// Named groups of dtypes, to say which dtypes an op accepts (OpDef::dtypes,
// published by GET /v1/ops as a list of names). Every list is in DType
// order, without repeats.
#pragma once

#include <initializer_list>
#include <vector>

#include "ops/dtype.h"

namespace tensord {

using DTypeList = std::vector<DType>;

DTypeList dtypes_all();       // every dtype of API.md 3.1
DTypeList dtypes_integral();  // uint8 int8 int16 int32 int64 (not bool)
DTypeList dtypes_floating();  // float16 bfloat16 float32 float64 (not float8)
DTypeList dtypes_float8();    // float8_e4m3fn float8_e5m2 float8_e8m0fnu
DTypeList dtypes_complex();   // complex64 complex128

// The union of `lists`.
DTypeList dtypes_join(std::initializer_list<DTypeList> lists);
// `from` without the dtypes in `removed`.
DTypeList dtypes_without(const DTypeList& from, const DTypeList& removed);

}  // namespace tensord
