#include "ops/dtype.h"

#include <array>
#include <string>

namespace tensord {
namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  std::string_view st_tag;
  std::string_view kserve;
  size_t size;
};

constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{
    {DType::kBool, "bool", "BOOL", "BOOL", 1},
    {DType::kUInt8, "uint8", "U8", "UINT8", 1},
    {DType::kInt8, "int8", "I8", "INT8", 1},
    {DType::kInt16, "int16", "I16", "INT16", 2},
    {DType::kInt32, "int32", "I32", "INT32", 4},
    {DType::kInt64, "int64", "I64", "INT64", 8},
    {DType::kFloat16, "float16", "F16", "FP16", 2},
    {DType::kBFloat16, "bfloat16", "BF16", "BF16", 2},
    {DType::kFloat32, "float32", "F32", "FP32", 4},
    {DType::kFloat64, "float64", "F64", "FP64", 8},
    {DType::kComplex64, "complex64", "C64", "COMPLEX64", 8},
    {DType::kComplex128, "complex128", "C128", "COMPLEX128", 16},
    {DType::kFloat8E4M3FN, "float8_e4m3fn", "F8_E4M3", "FP8_E4M3", 1},
    {DType::kFloat8E5M2, "float8_e5m2", "F8_E5M2", "FP8_E5M2", 1},
    {DType::kFloat8E8M0FNU, "float8_e8m0fnu", "F8_E8M0", "FP8_E8M0", 1},
}};

const DTypeInfo& info(DType t) {
  return kInfo[static_cast<size_t>(t)];
}

}  // namespace

size_t dtype_size(DType t) {
  return info(t).size;
}
size_t dtype_alignment(DType t) {
  return is_complex(t) ? info(t).size / 2 : info(t).size;
}
std::string_view dtype_name(DType t) {
  return info(t).name;
}
std::string_view dtype_safetensors_tag(DType t) {
  return info(t).st_tag;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  if (name.substr(0, 6) == "torch.") name.remove_prefix(6);
  for (const auto& i : kInfo) {
    if (name == i.name || name == i.kserve) return i.type;
  }
  struct Alias {
    std::string_view name;
    DType type;
  };
  static constexpr Alias kAliases[] = {
      {"float", DType::kFloat32},    {"double", DType::kFloat64},     {"half", DType::kFloat16},
      {"long", DType::kInt64},       {"int", DType::kInt32},          {"short", DType::kInt16},
      {"cfloat", DType::kComplex64}, {"cdouble", DType::kComplex128}, {"FP64", DType::kFloat64},
  };
  for (const auto& a : kAliases) {
    if (name == a.name) return a.type;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_safetensors_tag(std::string_view tag) {
  for (const auto& i : kInfo) {
    if (tag == i.st_tag) return i.type;
  }
  return std::nullopt;
}

bool is_complex(DType t) {
  return t == DType::kComplex64 || t == DType::kComplex128;
}

bool is_floating(DType t) {
  switch (t) {
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2:
    case DType::kFloat8E8M0FNU:
      return true;
    default:
      return false;
  }
}

bool is_integral(DType t, bool include_bool) {
  switch (t) {
    case DType::kBool:
      return include_bool;
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      return true;
    default:
      return false;
  }
}

int dtype_category(DType t) {
  if (t == DType::kBool) return 0;
  if (is_integral(t, false)) return 1;
  if (is_complex(t)) return 3;
  return 2;
}

DType to_complex(DType t) {
  if (is_complex(t)) return t;
  return t == DType::kFloat64 ? DType::kComplex128 : DType::kComplex64;
}

DType to_real(DType t) {
  if (t == DType::kComplex64) return DType::kFloat32;
  if (t == DType::kComplex128) return DType::kFloat64;
  return t;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // fp8 types promote only with themselves in PyTorch; mixing them with other
  // floats is an error there. We promote through float32, the type every
  // fp8 kernel computes in, and document it.
  auto fp8 = [](DType t) { return t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2 || t == DType::kFloat8E8M0FNU; };
  if (fp8(a) || fp8(b)) {
    DType other = fp8(a) ? b : a;
    if (fp8(other) || dtype_category(other) <= 1) return DType::kFloat32;
    return promote_types(DType::kFloat32, other);
  }
  int ca = dtype_category(a), cb = dtype_category(b);
  if (ca == 3 || cb == 3) {
    // complex with anything: complex of the wider real part
    DType ra = ca == 3 ? to_real(a) : a;
    DType rb = cb == 3 ? to_real(b) : b;
    DType r = (dtype_category(ra) == 2 && dtype_category(rb) == 2) ? promote_types(ra, rb)
              : dtype_category(ra) == 2                            ? ra
                                                                   : rb;
    return r == DType::kFloat64 ? DType::kComplex128 : DType::kComplex64;
  }
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    // float16 + bfloat16 -> float32; otherwise the wider
    if ((a == DType::kFloat16 && b == DType::kBFloat16) || (a == DType::kBFloat16 && b == DType::kFloat16))
      return DType::kFloat32;
    return dtype_size(a) >= dtype_size(b) ? a : b;
  }
  // integers: uint8 with a signed type -> the signed type able to hold both
  if (a == DType::kUInt8 || b == DType::kUInt8) {
    DType s = a == DType::kUInt8 ? b : a;
    return s == DType::kInt8 ? DType::kInt16 : s;
  }
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

}  // namespace tensord
