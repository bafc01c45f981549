// dispatch_dtype(dtype, f): calls f(TypeTag<T>{}) with T the storage type of
// `dtype` (bool, uint8_t, ..., Half, BFloat16, float, double,
// std::complex<float>, std::complex<double>, Float8E4M3FN, ...).
#pragma once

#include <complex>
#include <cstdint>

#include "ops/dtype.h"
#include "ops/error.h"

namespace tensord {

template <class T>
struct TypeTag {
  using type = T;
};

template <class F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kBool:
      return f(TypeTag<bool>{});
    case DType::kUInt8:
      return f(TypeTag<uint8_t>{});
    case DType::kInt8:
      return f(TypeTag<int8_t>{});
    case DType::kInt16:
      return f(TypeTag<int16_t>{});
    case DType::kInt32:
      return f(TypeTag<int32_t>{});
    case DType::kInt64:
      return f(TypeTag<int64_t>{});
    case DType::kFloat16:
      return f(TypeTag<Half>{});
    case DType::kBFloat16:
      return f(TypeTag<BFloat16>{});
    case DType::kFloat32:
      return f(TypeTag<float>{});
    case DType::kFloat64:
      return f(TypeTag<double>{});
    case DType::kComplex64:
      return f(TypeTag<std::complex<float>>{});
    case DType::kComplex128:
      return f(TypeTag<std::complex<double>>{});
    case DType::kFloat8E4M3FN:
      return f(TypeTag<Float8E4M3FN>{});
    case DType::kFloat8E5M2:
      return f(TypeTag<Float8E5M2>{});
    case DType::kFloat8E8M0FNU:
      return f(TypeTag<Float8E8M0FNU>{});
  }
  throw Error(ErrorCode::kInternal, "bad dtype");
}

}  // namespace tensord
