// Element-wise dtype conversion (see convert.h for the cast rules).
//
// Every (source, destination) pair gets its own inlined loop: the source is
// loaded into its compute type (narrow floats -> float, bool -> bool read
// from a byte as "!= 0"), then cast_to<D> applies the PyTorch rule. Loads and
// stores go through memcpy so unaligned buffers (e.g. a safetensors body) are
// fine; compilers turn them into plain moves.
//
// Choices where PyTorch leaves room or has undefined behaviour:
//  - float -> integer truncates toward zero; NaN gives 0; values beyond the
//    integer's range saturate to its limits (uint8 included: -1.5 -> 0).
//  - integer -> narrower integer wraps (two's complement), as static_cast.
//  - double / int64 -> float16, bfloat16 or float8 goes through float32 (two
//    roundings), as c10::Half(double) etc. do.
//  - a bool byte other than 0 or 1 reads as true.
#include "ops/convert.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/dispatch.h"
#include "ops/kernels/scalar_traits.h"

namespace tensord {
namespace {

template <class T>
struct IsComplex : std::false_type {};
template <class T>
struct IsComplex<std::complex<T>> : std::true_type {};

template <class T>
inline constexpr bool kIsNarrowFloat =
    std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Float8E4M3FN> ||
    std::is_same_v<T, Float8E5M2> || std::is_same_v<T, Float8E8M0FNU>;

// Storage type -> the type a loaded value is held in.
template <class T>
using Loaded = std::conditional_t<kIsNarrowFloat<T>, float, T>;

template <class T>
inline Loaded<T> load_elem(const void* base, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    uint8_t b;
    std::memcpy(&b, static_cast<const char*>(base) + i, 1);
    return b != 0;
  } else {
    T v;
    std::memcpy(&v, static_cast<const char*>(base) + static_cast<size_t>(i) * sizeof(T), sizeof(T));
    if constexpr (kIsNarrowFloat<T>) {
      return kernels::ScalarTraits<T>::load(v);
    } else {
      return v;
    }
  }
}

template <class T>
inline void store_elem(void* base, int64_t i, T v) {
  std::memcpy(static_cast<char*>(base) + static_cast<size_t>(i) * sizeof(T), &v, sizeof(T));
}

// Floating value -> integer I: truncation toward zero, NaN -> 0, saturation.
template <class I, class F>
inline I float_to_int(F f) {
  double v = static_cast<double>(f);
  if (v != v) return I{0};
  constexpr double kUpper = static_cast<double>(std::numeric_limits<I>::max()) + 1.0;  // 2^k, exact
  constexpr double kLower = static_cast<double>(std::numeric_limits<I>::min());        // -2^k or 0, exact
  if (v >= kUpper) return std::numeric_limits<I>::max();
  if (v <= kLower - 1.0) return std::numeric_limits<I>::min();  // int64: kLower - 1 rounds to kLower: same answer
  return static_cast<I>(v);
}

// The cast rules, from a loaded value V to the storage type D.
template <class D, class V>
inline D cast_to(V v) {
  if constexpr (IsComplex<V>::value && !IsComplex<D>::value) {
    if constexpr (std::is_same_v<D, bool>) {
      return v.real() != 0 || v.imag() != 0;
    } else {
      return cast_to<D>(v.real());
    }
  } else if constexpr (std::is_same_v<D, bool>) {
    return v != V{0};  // NaN != 0: true, as PyTorch
  } else if constexpr (std::is_integral_v<D>) {
    if constexpr (std::is_floating_point_v<V>) {
      return float_to_int<D>(v);
    } else {
      return static_cast<D>(v);  // bool or integer: modular, well defined since C++20
    }
  } else if constexpr (std::is_floating_point_v<D>) {
    return static_cast<D>(v);
  } else if constexpr (IsComplex<D>::value) {
    using C = typename D::value_type;
    if constexpr (IsComplex<V>::value) {
      return D(static_cast<C>(v.real()), static_cast<C>(v.imag()));
    } else {
      return D(static_cast<C>(v), C{0});
    }
  } else {
    static_assert(kIsNarrowFloat<D>);
    return kernels::ScalarTraits<D>::store(static_cast<float>(v));
  }
}

template <class S, class D>
void convert_loop(const void* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store_elem<D>(dst, i, cast_to<D>(load_elem<S>(src, i)));
}

}  // namespace

void convert_elements(const void* src, DType st, void* dst, DType dt, int64_t n) {
  if (n <= 0) return;
  if (st == dt) {
    if (src != dst) std::memmove(dst, src, static_cast<size_t>(n) * dtype_size(st));
    return;
  }
  dispatch_dtype(st, [&](auto s_tag) {
    using S = typename decltype(s_tag)::type;
    dispatch_dtype(dt, [&](auto d_tag) {
      using D = typename decltype(d_tag)::type;
      convert_loop<S, D>(src, dst, n);
    });
  });
}

double load_as_double(DType t, const void* base, int64_t i) {
  return dispatch_dtype(t, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    auto v = load_elem<T>(base, i);
    if constexpr (IsComplex<decltype(v)>::value) {
      return static_cast<double>(v.real());
    } else {
      return static_cast<double>(v);
    }
  });
}

std::complex<double> load_as_complex(DType t, const void* base, int64_t i) {
  return dispatch_dtype(t, [&](auto tag) -> std::complex<double> {
    using T = typename decltype(tag)::type;
    return cast_to<std::complex<double>>(load_elem<T>(base, i));
  });
}

void store_from_double(DType t, void* base, int64_t i, double v) {
  dispatch_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    store_elem<T>(base, i, cast_to<T>(v));
  });
}

void store_from_complex(DType t, void* base, int64_t i, std::complex<double> v) {
  dispatch_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    store_elem<T>(base, i, cast_to<T>(v));
  });
}

}  // namespace tensord
