#include "ops/type_promotion.h"

#include <optional>

namespace tensord {
namespace {

DType promote_opt(std::optional<DType> a, DType b) {
  return a ? promote_types(*a, b) : b;
}

// c10's combine_categories: `higher` is the result of a higher-priority
// tier, `lower` of the next one.
std::optional<DType> combine_categories(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_complex(*higher)) return higher;
  if (is_complex(*lower)) {
    // A floating higher tier keeps its value type: float64 + 1j -> complex128.
    if (is_floating(*higher)) return to_complex(*higher);
    return lower;
  }
  if (is_floating(*higher)) return higher;
  if (*higher == DType::kBool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}

}  // namespace

DType default_dtype_for_category(DType t) {
  switch (dtype_category(t)) {
    case 0:
      return DType::kBool;
    case 1:
      return DType::kInt64;
    case 2:
      return DType::kFloat32;
    default:
      return DType::kComplex64;
  }
}

DType result_type(const std::vector<TensorMeta>& operands) {
  std::optional<DType> dim_result, zero_result, wrapped_result;
  for (const auto& m : operands) {
    DType t = m.dtype;
    if (m.wrapped_number) {
      // Wrapped floats and complexes count as the default dtype of their
      // category; wrapped ints stay int64 and bools bool.
      if (is_floating(t) || is_complex(t)) t = default_dtype_for_category(t);
      wrapped_result = promote_opt(wrapped_result, t);
    } else if (!m.shape.empty()) {
      dim_result = promote_opt(dim_result, t);
    } else {
      zero_result = promote_opt(zero_result, t);
    }
  }
  auto r = combine_categories(dim_result, combine_categories(zero_result, wrapped_result));
  return r ? *r : DType::kFloat32;
}

DType result_type(const TensorMeta& a, const TensorMeta& b) {
  return result_type(std::vector<TensorMeta>{a, b});
}

bool can_cast(DType from, DType to) {
  return dtype_category(from) <= dtype_category(to);
}

DType to_floating_default(DType t) {
  return dtype_category(t) <= 1 ? DType::kFloat32 : t;
}

}  // namespace tensord
