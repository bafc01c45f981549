// PyTorch's type promotion over op operands (torch.result_type), shared by
// every op family that mixes operand dtypes.
#pragma once

#include <vector>

#include "ops/dtype.h"
#include "ops/tensor.h"

namespace tensord {

// torch.result_type over `operands`, with PyTorch's three priority tiers:
// tensors with dim > 0, then 0-dim tensors, then wrapped numbers
// (TensorMeta::wrapped_number). A lower tier changes the result only when
// its category (bool < integer < floating < complex) is higher; a wrapped
// float then counts as float32 and a wrapped complex as complex64 (the
// default dtypes), except that complex with a floating result keeps the
// float's width (float64 tensor + 1j -> complex128).
DType result_type(const std::vector<TensorMeta>& operands);
DType result_type(const TensorMeta& a, const TensorMeta& b);

// The dtype a wrapped Python number of `t`'s category defaults to:
// bool, int64, float32 or complex64.
DType default_dtype_for_category(DType t);

// torch.can_cast(from, to): false when `to` is a lower category than `from`
// (float -> int, complex -> float, non-bool -> bool).
bool can_cast(DType from, DType to);

// Floating dtype an op that needs one (exp, true division, mean) computes
// in for `t`: integers and bool go to the default float32, others stay.
DType to_floating_default(DType t);

}  // namespace tensord
