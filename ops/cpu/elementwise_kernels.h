// Typed block loops for the CPU elementwise engine (elementwise_loop.h) and
// the dispatch that picks them. The arithmetic itself is in
// ops/kernels/elementwise.h; here are only loops specialised on the input
// strides (0 or 1) so the compiler vectorises the contiguous case.
#pragma once

#include <algorithm>
#include <complex>
#include <cstdint>
#include <span>
#include <utility>

#include "ops/cpu/elementwise_loop.h"
#include "ops/dispatch.h"
#include "ops/error.h"
#include "ops/kernels/elementwise.h"
#include "ops/kernels/scalar_traits.h"

namespace tensord::cpu {

// Calls f(TypeTag<T>) with T the compute type of a kernel dtype (never a
// narrow float: those compute as float32, see ew_compute_dtype).
template <class F>
decltype(auto) dispatch_compute(DType t, F&& f) {
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
    case DType::kFloat32:
      return f(TypeTag<float>{});
    case DType::kFloat64:
      return f(TypeTag<double>{});
    case DType::kComplex64:
      return f(TypeTag<std::complex<float>>{});
    case DType::kComplex128:
      return f(TypeTag<std::complex<double>>{});
    default:
      break;
  }
  throw Error(ErrorCode::kInternal, "elementwise: no compute type for " + std::string(dtype_name(t)));
}

// out[i] = store(op(a[i], b[i])) with a/b strides 0 or 1.
template <class Op, class In, class Out>
void binary_block(const void* state, void* out, const void* const* in, const int64_t* st, int64_t n) {
  const Op op = *static_cast<const Op*>(state);
  using S = kernels::ScalarTraits<Out>;
  Out* __restrict o = static_cast<Out*>(out);
  const In* __restrict a = static_cast<const In*>(in[0]);
  const In* __restrict b = static_cast<const In*>(in[1]);
  if (st[0] && st[1]) {
    for (int64_t i = 0; i < n; ++i) o[i] = S::store(op(a[i], b[i]));
  } else if (st[0]) {
    const In y = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = S::store(op(a[i], y));
  } else if (st[1]) {
    const In x = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = S::store(op(x, b[i]));
  } else {
    std::fill(o, o + n, S::store(op(a[0], b[0])));
  }
}

// out[i] = store(op(a[i])).
template <class Op, class In, class Out>
void unary_block(const void* state, void* out, const void* const* in, const int64_t* st, int64_t n) {
  const Op op = *static_cast<const Op*>(state);
  using S = kernels::ScalarTraits<Out>;
  Out* __restrict o = static_cast<Out*>(out);
  const In* __restrict a = static_cast<const In*>(in[0]);
  if (st[0]) {
    for (int64_t i = 0; i < n; ++i) o[i] = S::store(op(a[i]));
  } else {
    std::fill(o, o + n, S::store(op(a[0])));
  }
}

// out[i] = cond[i] ? a[i] : b[i].
template <class In, class Out>
void where_block(const void*, void* out, const void* const* in, const int64_t* st, int64_t n) {
  using S = kernels::ScalarTraits<Out>;
  Out* __restrict o = static_cast<Out*>(out);
  const bool* __restrict c = static_cast<const bool*>(in[0]);
  const In* __restrict a = static_cast<const In*>(in[1]);
  const In* __restrict b = static_cast<const In*>(in[2]);
  if (st[0] && st[1] && st[2]) {
    for (int64_t i = 0; i < n; ++i) o[i] = S::store(c[i] ? a[i] : b[i]);
  } else if (st[0] && !st[1] && !st[2]) {
    const Out x = S::store(a[0]), y = S::store(b[0]);
    for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? x : y;
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = S::store(c[i * st[0]] ? a[i * st[1]] : b[i * st[2]]);
  }
}

// out[i] = clamp(x[i], lo[i], hi[i]).
template <class In, class Out>
void clamp_block(const void*, void* out, const void* const* in, const int64_t* st, int64_t n) {
  using S = kernels::ScalarTraits<Out>;
  Out* __restrict o = static_cast<Out*>(out);
  const In* __restrict x = static_cast<const In*>(in[0]);
  const In* __restrict lo = static_cast<const In*>(in[1]);
  const In* __restrict hi = static_cast<const In*>(in[2]);
  if (st[0] && !st[1] && !st[2]) {
    const In l = lo[0], h = hi[0];
    for (int64_t i = 0; i < n; ++i) o[i] = S::store(kernels::clamp_both(x[i], l, h));
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = S::store(kernels::clamp_both(x[i * st[0]], lo[i * st[1]], hi[i * st[2]]));
  }
}

[[noreturn]] inline void ew_unsupported(const char* op, DType t) {
  throw Error(ErrorCode::kInternal, std::string(op) + ": no kernel for " + std::string(dtype_name(t)));
}

// Binary op whose output dtype is the common dtype (add, mul, pow...).
// Narrow-float results compute in float32 and the engine rounds on store.
template <template <class> class Op>
void run_binary_same(const OpContext& ctx, const char* name, const Tensor& out, const Tensor& a, const Tensor& b,
                     const kernels::EwParams& params, bool keep_scalar_precision, int64_t grain = kEwGrain) {
  const DType common = out.dtype();
  const DType kd = ew_compute_dtype(common);
  const EwInput ins[2] = {ew_input(a, common), ew_input(b, common, keep_scalar_precision)};
  dispatch_compute(kd, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (Op<T>::kSupported) {
      const Op<T> op(params);
      ew_run(ctx, out, kd, ins, &binary_block<Op<T>, T, T>, &op, grain);
    } else {
      ew_unsupported(name, common);
    }
  });
}

// Binary op computed in `common` with a bool output (eq, lt, logical_and...).
template <template <class> class Op>
void run_binary_bool(const OpContext& ctx, const char* name, const Tensor& out, const Tensor& a, const Tensor& b,
                     DType common) {
  const EwInput ins[2] = {ew_input(a, common), ew_input(b, common)};
  dispatch_compute(ew_compute_dtype(common), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (Op<T>::kSupported) {
      const Op<T> op(kernels::EwParams{});
      ew_run(ctx, out, DType::kBool, ins, &binary_block<Op<T>, T, bool>, &op);
    } else {
      ew_unsupported(name, common);
    }
  });
}

// Unary op whose output dtype is the (possibly promoted) input dtype.
template <template <class> class Op>
void run_unary_same(const OpContext& ctx, const char* name, const Tensor& out, const Tensor& a,
                    int64_t grain = kEwGrain) {
  const DType common = out.dtype();
  const DType kd = ew_compute_dtype(common);
  const EwInput ins[1] = {ew_input(a, common)};
  dispatch_compute(kd, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (Op<T>::kSupported) {
      const Op<T> op{};
      using R = decltype(op(std::declval<T>()));
      ew_run(ctx, out, kd, ins, &unary_block<Op<T>, T, R>, &op, grain);
    } else {
      ew_unsupported(name, common);
    }
  });
}

}  // namespace tensord::cpu
