// Per-element arithmetic of the elementwise ops, once for host and device.
//
// Every functor is a class template over the compute type T: bool, the
// integer types, float, double, std::complex<float>, std::complex<double>.
// Narrow floats (float16, bfloat16, float8) compute in float and the caller
// rounds on store (ScalarTraits). Each functor says which T it supports in
// `kSupported<T>`; shape inference rejects the others, and the loops do not
// instantiate them.
//
// Semantics are PyTorch's CPU kernels':
//  - signed integer add/sub/mul/neg/abs wrap (two's complement) instead of
//    C++'s undefined overflow;
//  - complex multiply/divide use c10::complex's formulas (no C99 inf
//    recovery), so results match PyTorch bit for bit on finite inputs;
//  - maximum/minimum/clamp propagate NaN;
//  - integer floor/trunc division by zero returns 0 here; the host loop
//    rejects it before calling (PyTorch raises ZeroDivisionError).
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/kernels/common.h"

namespace tensord::kernels {

template <class T>
struct IsComplexT : std::false_type {};
template <class T>
struct IsComplexT<std::complex<T>> : std::true_type {};
template <class T>
inline constexpr bool kIsComplex = IsComplexT<T>::value;
template <class T>
inline constexpr bool kIsBool = std::is_same_v<T, bool>;
template <class T>
inline constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <class T>
inline constexpr bool kIsFloat = std::is_floating_point_v<T>;

// Real part type of a compute type (float for complex<float>, else T).
template <class T>
struct RealOf {
  using type = T;
};
template <class T>
struct RealOf<std::complex<T>> {
  using type = T;
};
template <class T>
using RealT = typename RealOf<T>::type;

// Parameters an op may carry (alpha of add/sub, the exponent of pow when it
// is a Python number), already converted to double / int64.
struct EwParams {
  double alpha_f = 1.0;
  int64_t alpha_i = 1;
  bool alpha_b = true;
};

// ---- wrapping integer arithmetic ----
template <class T>
using WideUnsigned = std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>;

template <class T>
TENSORD_INLINE T wrap_add(T a, T b) {
  if constexpr (kIsInt<T>) {
    return static_cast<T>(static_cast<WideUnsigned<T>>(a) + static_cast<WideUnsigned<T>>(b));
  } else {
    return a + b;
  }
}
template <class T>
TENSORD_INLINE T wrap_sub(T a, T b) {
  if constexpr (kIsInt<T>) {
    return static_cast<T>(static_cast<WideUnsigned<T>>(a) - static_cast<WideUnsigned<T>>(b));
  } else {
    return a - b;
  }
}
template <class T>
TENSORD_INLINE T wrap_mul(T a, T b) {
  if constexpr (kIsInt<T>) {
    return static_cast<T>(static_cast<WideUnsigned<T>>(a) * static_cast<WideUnsigned<T>>(b));
  } else {
    return a * b;
  }
}

// ---- complex helpers with c10::complex's formulas ----
template <class C>
TENSORD_INLINE C cmul(C x, C y) {
  using R = typename C::value_type;
  R a = x.real(), b = x.imag(), c = y.real(), d = y.imag();
  return C(a * c - b * d, a * d + b * c);
}
template <class C>
TENSORD_INLINE C cdiv(C x, C y) {
  using R = typename C::value_type;
  R a = x.real(), b = x.imag(), c = y.real(), d = y.imag();
  R abs_c = std::abs(c), abs_d = std::abs(d);
  if (abs_c >= abs_d) {
    if (abs_c == R(0) && abs_d == R(0)) return C(a / abs_c, b / abs_d);
    R rat = d / c;
    R scl = R(1) / (c + d * rat);
    return C((a + b * rat) * scl, (b - a * rat) * scl);
  }
  R rat = c / d;
  R scl = R(1) / (d + c * rat);
  return C((a * rat + b) * scl, (b * rat - a) * scl);
}

template <class T>
TENSORD_INLINE T gmul(T a, T b) {
  if constexpr (kIsComplex<T>) {
    return cmul(a, b);
  } else {
    return wrap_mul(a, b);
  }
}

template <class T>
TENSORD_INLINE bool is_nan(T v) {
  if constexpr (kIsFloat<T>) {
    return v != v;
  } else {
    return false;
  }
}

// ---- binary arithmetic ----

// a + alpha * b (bool: a || (alpha && b)).
template <class T>
struct AddOp {
  static constexpr bool kSupported = true;
  T alpha;
  explicit AddOp(const EwParams& p) : alpha(alpha_from(p)) {}
  static T alpha_from(const EwParams& p) {
    if constexpr (kIsBool<T>) {
      return p.alpha_b;
    } else if constexpr (kIsInt<T>) {
      return static_cast<T>(p.alpha_i);
    } else {
      return static_cast<T>(static_cast<RealT<T>>(p.alpha_f));
    }
  }
  TENSORD_INLINE T operator()(T a, T b) const {
    if constexpr (kIsBool<T>) {
      return a || (alpha && b);
    } else {
      return wrap_add(a, gmul(alpha, b));
    }
  }
};

// a - alpha * b; not for bool (PyTorch rejects it).
template <class T>
struct SubOp {
  static constexpr bool kSupported = !kIsBool<T>;
  T alpha;
  explicit SubOp(const EwParams& p) : alpha(AddOp<T>::alpha_from(p)) {}
  TENSORD_INLINE T operator()(T a, T b) const { return wrap_sub(a, gmul(alpha, b)); }
};

// Fast forms for alpha == 1 (the common case): plain a + b, a - b.
template <class T>
struct PlainAddOp {
  static constexpr bool kSupported = true;
  explicit PlainAddOp(const EwParams&) {}
  TENSORD_INLINE T operator()(T a, T b) const {
    if constexpr (kIsBool<T>) {
      return a || b;
    } else {
      return wrap_add(a, b);
    }
  }
};
template <class T>
struct PlainSubOp {
  static constexpr bool kSupported = !kIsBool<T>;
  explicit PlainSubOp(const EwParams&) {}
  TENSORD_INLINE T operator()(T a, T b) const { return wrap_sub(a, b); }
};

template <class T>
struct MulOp {
  static constexpr bool kSupported = true;
  explicit MulOp(const EwParams&) {}
  TENSORD_INLINE T operator()(T a, T b) const {
    if constexpr (kIsBool<T>) {
      return a && b;
    } else {
      return gmul(a, b);
    }
  }
};

// True division: floating and complex only (integers are promoted first).
template <class T>
struct DivOp {
  static constexpr bool kSupported = kIsFloat<T> || kIsComplex<T>;
  explicit DivOp(const EwParams&) {}
  TENSORD_INLINE T operator()(T a, T b) const {
    if constexpr (kIsComplex<T>) {
      return cdiv(a, b);
    } else {
      return a / b;
    }
  }
};

template <class T>
TENSORD_INLINE T int_div_trunc(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return static_cast<T>(WideUnsigned<T>(0) - static_cast<WideUnsigned<T>>(a));  // MIN / -1 wraps
  }
  return static_cast<T>(a / b);
}

template <class T>
TENSORD_INLINE T int_div_floor(T a, T b) {
  T q = int_div_trunc(a, b);
  if constexpr (std::is_signed_v<T>) {
    if (b != 0 && b != -1 && ((a < 0) != (b < 0))) {
      T r = static_cast<T>(a % b);
      if (r != 0) q = static_cast<T>(q - 1);
    }
  }
  return q;
}

// c10's div_floor_floating.
template <class T>
TENSORD_INLINE T float_div_floor(T a, T b) {
  if (b == 0) return a / b;
  T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if ((mod != 0) && (b < 0) != (mod < 0)) div -= T(1);
  T floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > T(0.5)) floordiv += T(1);
  } else {
    floordiv = std::copysign(T(0), a / b);
  }
  return floordiv;
}

// div(rounding_mode="trunc"): real types, no bool.
template <class T>
struct DivTruncOp {
  static constexpr bool kSupported = kIsInt<T> || kIsFloat<T>;
  explicit DivTruncOp(const EwParams&) {}
  TENSORD_INLINE T operator()(T a, T b) const {
    if constexpr (kIsInt<T>) {
      return int_div_trunc(a, b);
    } else {
      return std::trunc(a / b);
    }
  }
};

// div(rounding_mode="floor"): real types, no bool.
template <class T>
struct DivFloorOp {
  static constexpr bool kSupported = kIsInt<T> || kIsFloat<T>;
  explicit DivFloorOp(const EwParams&) {}
  TENSORD_INLINE T operator()(T a, T b) const {
    if constexpr (kIsInt<T>) {
      return int_div_floor(a, b);
    } else {
      return float_div_floor(a, b);
    }
  }
};

// Integer power by squaring, wrapping; negative exponents give 0 unless the
// base is 1 or -1 (PyTorch's powi).
template <class T>
TENSORD_INLINE T int_pow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = wrap_mul(result, base);
    exp = static_cast<T>(exp >> 1);
    base = wrap_mul(base, base);
  }
  return result;
}

template <class T>
struct PowOp {
  static constexpr bool kSupported = !kIsBool<T>;
  explicit PowOp(const EwParams&) {}
  TENSORD_INLINE T operator()(T a, T b) const {
    if constexpr (kIsInt<T>) {
      return int_pow(a, b);
    } else {
      return std::pow(a, b);
    }
  }
};

// pow(tensor, Python number) for floating and complex T, with PyTorch's
// special cases (sqrt, rsqrt, reciprocal, squares, cubes) and, for real T,
// the general case computed in double as PyTorch does.
enum class PowScalarKind { kGeneral, kSqrt, kRsqrt, kReciprocal, kSquare, kCube, kInvSquare };

TENSORD_INLINE PowScalarKind pow_scalar_kind(double e) {
  if (e == 0.5) return PowScalarKind::kSqrt;
  if (e == -0.5) return PowScalarKind::kRsqrt;
  if (e == -1.0) return PowScalarKind::kReciprocal;
  if (e == 2.0) return PowScalarKind::kSquare;
  if (e == 3.0) return PowScalarKind::kCube;
  if (e == -2.0) return PowScalarKind::kInvSquare;
  return PowScalarKind::kGeneral;
}

template <class T, PowScalarKind K>
struct PowScalarOp {
  static constexpr bool kSupported = kIsFloat<T> || kIsComplex<T>;
  double e;
  TENSORD_INLINE T recip(T a) const {
    if constexpr (kIsComplex<T>) {
      return cdiv(T(1), a);
    } else {
      return T(1) / a;
    }
  }
  TENSORD_INLINE T operator()(T a) const {
    if constexpr (K == PowScalarKind::kSqrt) return std::sqrt(a);
    if constexpr (K == PowScalarKind::kRsqrt) return recip(std::sqrt(a));
    if constexpr (K == PowScalarKind::kReciprocal) return recip(a);
    if constexpr (K == PowScalarKind::kSquare) return gmul(a, a);
    if constexpr (K == PowScalarKind::kCube) return gmul(gmul(a, a), a);
    if constexpr (K == PowScalarKind::kInvSquare) return recip(gmul(a, a));
    if constexpr (kIsComplex<T>) {
      return std::pow(a, T(static_cast<RealT<T>>(e)));
    } else {
      return static_cast<T>(std::pow(static_cast<double>(a), e));
    }
  }
};

// maximum / minimum: NaN-propagating; bool is or / and; no complex.
template <class T>
struct MaximumOp {
  static constexpr bool kSupported = !kIsComplex<T>;
  explicit MaximumOp(const EwParams&) {}
  TENSORD_INLINE T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return a < b ? b : a;
  }
};
template <class T>
struct MinimumOp {
  static constexpr bool kSupported = !kIsComplex<T>;
  explicit MinimumOp(const EwParams&) {}
  TENSORD_INLINE T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return b < a ? b : a;
  }
};

// ---- comparisons and logic (result bool) ----
template <class T>
struct EqOp {
  static constexpr bool kSupported = true;
  explicit EqOp(const EwParams&) {}
  TENSORD_INLINE bool operator()(T a, T b) const { return a == b; }
};
template <class T>
struct NeOp {
  static constexpr bool kSupported = true;
  explicit NeOp(const EwParams&) {}
  TENSORD_INLINE bool operator()(T a, T b) const { return a != b; }
};
template <class T>
struct LtOp {
  static constexpr bool kSupported = !kIsComplex<T>;
  explicit LtOp(const EwParams&) {}
  TENSORD_INLINE bool operator()(T a, T b) const { return a < b; }
};
template <class T>
struct LeOp {
  static constexpr bool kSupported = !kIsComplex<T>;
  explicit LeOp(const EwParams&) {}
  TENSORD_INLINE bool operator()(T a, T b) const { return a <= b; }
};
template <class T>
struct GtOp {
  static constexpr bool kSupported = !kIsComplex<T>;
  explicit GtOp(const EwParams&) {}
  TENSORD_INLINE bool operator()(T a, T b) const { return a > b; }
};
template <class T>
struct GeOp {
  static constexpr bool kSupported = !kIsComplex<T>;
  explicit GeOp(const EwParams&) {}
  TENSORD_INLINE bool operator()(T a, T b) const { return a >= b; }
};
// Logical ops see their operands already cast to bool.
template <class T>
struct LogicalAndOp {
  static constexpr bool kSupported = kIsBool<T>;
  explicit LogicalAndOp(const EwParams&) {}
  TENSORD_INLINE bool operator()(T a, T b) const { return a && b; }
};
template <class T>
struct LogicalOrOp {
  static constexpr bool kSupported = kIsBool<T>;
  explicit LogicalOrOp(const EwParams&) {}
  TENSORD_INLINE bool operator()(T a, T b) const { return a || b; }
};

// ---- unary ----
template <class T>
struct NegOp {
  static constexpr bool kSupported = !kIsBool<T>;
  TENSORD_INLINE T operator()(T a) const {
    if constexpr (kIsInt<T>) {
      return wrap_sub(T(0), a);
    } else {
      return -a;
    }
  }
};

// abs; complex -> its real type (the loop stores RealT<T>).
template <class T>
struct AbsOp {
  static constexpr bool kSupported = true;
  TENSORD_INLINE RealT<T> operator()(T a) const {
    if constexpr (kIsComplex<T>) {
      return std::abs(a);
    } else if constexpr (kIsFloat<T>) {
      return std::fabs(a);
    } else if constexpr (kIsInt<T> && std::is_signed_v<T>) {
      return a < 0 ? wrap_sub(T(0), a) : a;
    } else {
      return a;
    }
  }
};

// Floating unary functions: integers are promoted to float32 before they
// get here.
template <class T>
inline constexpr bool kFloatOrComplex = kIsFloat<T> || kIsComplex<T>;

template <class T>
struct ExpOp {
  static constexpr bool kSupported = kFloatOrComplex<T>;
  TENSORD_INLINE T operator()(T a) const { return std::exp(a); }
};
template <class T>
struct LogOp {
  static constexpr bool kSupported = kFloatOrComplex<T>;
  TENSORD_INLINE T operator()(T a) const { return std::log(a); }
};
template <class T>
struct SqrtOp {
  static constexpr bool kSupported = kFloatOrComplex<T>;
  TENSORD_INLINE T operator()(T a) const { return std::sqrt(a); }
};
template <class T>
struct RsqrtOp {
  static constexpr bool kSupported = kFloatOrComplex<T>;
  TENSORD_INLINE T operator()(T a) const {
    if constexpr (kIsComplex<T>) {
      return cdiv(T(1), std::sqrt(a));
    } else {
      return T(1) / std::sqrt(a);
    }
  }
};
template <class T>
struct SigmoidOp {
  static constexpr bool kSupported = kFloatOrComplex<T>;
  TENSORD_INLINE T operator()(T a) const {
    if constexpr (kIsComplex<T>) {
      return cdiv(T(1), T(1) + std::exp(-a));
    } else {
      return T(1) / (T(1) + std::exp(-a));
    }
  }
};
template <class T>
struct TanhOp {
  static constexpr bool kSupported = kFloatOrComplex<T>;
  TENSORD_INLINE T operator()(T a) const { return std::tanh(a); }
};

// relu = clamp_min(x, 0): NaN stays NaN; no bool, no complex.
template <class T>
struct ReluOp {
  static constexpr bool kSupported = kIsInt<T> || kIsFloat<T>;
  TENSORD_INLINE T operator()(T a) const { return a < T(0) ? T(0) : a; }
};

// Input already cast to bool.
template <class T>
struct LogicalNotOp {
  static constexpr bool kSupported = kIsBool<T>;
  TENSORD_INLINE bool operator()(T a) const { return !a; }
};

template <class T>
struct IdentityOp {
  static constexpr bool kSupported = true;
  TENSORD_INLINE T operator()(T a) const { return a; }
};

// ---- clamp and where ----

// clamp(x, lo, hi) as PyTorch: a NaN bound gives NaN, NaN x stays NaN,
// lo > hi gives hi.
template <class T>
TENSORD_INLINE T clamp_both(T x, T lo, T hi) {
  if (is_nan(lo) || is_nan(hi)) return std::numeric_limits<T>::quiet_NaN();
  T r = x < lo ? lo : x;
  return hi < r ? hi : r;
}
template <class T>
TENSORD_INLINE T clamp_lo(T x, T lo) {
  if (is_nan(lo)) return lo;
  return x < lo ? lo : x;
}
template <class T>
TENSORD_INLINE T clamp_hi(T x, T hi) {
  if (is_nan(hi)) return hi;
  return hi < x ? hi : x;
}

template <class T>
struct ClampMinOp {
  static constexpr bool kSupported = !kIsComplex<T>;
  explicit ClampMinOp(const EwParams&) {}
  TENSORD_INLINE T operator()(T x, T lo) const { return clamp_lo(x, lo); }
};
template <class T>
struct ClampMaxOp {
  static constexpr bool kSupported = !kIsComplex<T>;
  explicit ClampMaxOp(const EwParams&) {}
  TENSORD_INLINE T operator()(T x, T hi) const { return clamp_hi(x, hi); }
};

}  // namespace tensord::kernels
