// Element types of API.md 3.1, their names, sizes and PyTorch promotion.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tensord {

enum class DType : uint8_t {
  kBool,
  kUInt8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kComplex64,
  kComplex128,
  kFloat8E4M3FN,
  kFloat8E5M2,
  kFloat8E8M0FNU,
};
inline constexpr int kNumDTypes = 15;

// Storage wrappers for the narrow float types (bits only; math in float).
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
struct Float8E4M3FN {
  uint8_t bits;
};
struct Float8E5M2 {
  uint8_t bits;
};
struct Float8E8M0FNU {
  uint8_t bits;
};

size_t dtype_size(DType t);
// alignof the element type (a complex type: its component's).
size_t dtype_alignment(DType t);
// PyTorch name: "float32", "bfloat16", "float8_e4m3fn", ...
std::string_view dtype_name(DType t);
// Accepts PyTorch names (with or without "torch."), common aliases
// ("float", "double", "half", "long", "int", "cfloat") and KServe v2 names
// ("FP32", "INT64", "BOOL", "BF16", ...).
std::optional<DType> dtype_from_name(std::string_view name);
// safetensors tags: BOOL U8 I8 I16 I32 I64 F16 BF16 F32 F64 F8_E4M3 F8_E5M2 F8_E8M0 C64 C128.
std::string_view dtype_safetensors_tag(DType t);
std::optional<DType> dtype_from_safetensors_tag(std::string_view tag);

bool is_floating(DType t);  // real floating types, fp8 included
bool is_complex(DType t);
bool is_integral(DType t, bool include_bool);

// Type-promotion category: 0 bool, 1 integer, 2 floating, 3 complex.
int dtype_category(DType t);

// torch.promote_types(a, b).
DType promote_types(DType a, DType b);

// Complex type whose components are `t` (float32 -> complex64), or the real
// type of a complex (complex64 -> float32).
DType to_complex(DType t);
DType to_real(DType t);

}  // namespace tensord
