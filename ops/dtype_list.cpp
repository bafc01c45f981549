#include "ops/dtype_list.h"

#include <algorithm>

namespace tensord {
namespace {

DTypeList sorted(DTypeList l) {
  std::sort(l.begin(), l.end());
  l.erase(std::unique(l.begin(), l.end()), l.end());
  return l;
}

}  // namespace

DTypeList dtypes_all() {
  DTypeList l;
  for (int i = 0; i < kNumDTypes; ++i) l.push_back(static_cast<DType>(i));
  return l;
}

DTypeList dtypes_integral() {
  return {DType::kUInt8, DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64};
}

DTypeList dtypes_floating() {
  return {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64};
}

DTypeList dtypes_float8() {
  return {DType::kFloat8E4M3FN, DType::kFloat8E5M2, DType::kFloat8E8M0FNU};
}

DTypeList dtypes_complex() {
  return {DType::kComplex64, DType::kComplex128};
}

DTypeList dtypes_join(std::initializer_list<DTypeList> lists) {
  DTypeList out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return sorted(std::move(out));
}

DTypeList dtypes_without(const DTypeList& from, const DTypeList& removed) {
  DTypeList out;
  for (DType t : from) {
    if (std::find(removed.begin(), removed.end(), t) == removed.end()) out.push_back(t);
  }
  return sorted(std::move(out));
}

}  // namespace tensord
