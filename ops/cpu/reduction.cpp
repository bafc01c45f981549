// Reductions: sum mean amax amin (and, in their own files, argmax and
// norm). dim = int or int list, negative allowed; None or [] = all dims.
//
// Accumulators: integers and bool sum in int64 (wrapping), every floating
// sum/mean/norm in double (complex<double>), max/min in the compute type.
// The folding itself is ops/cpu/reduce_loop.h; results do not depend on the
// number of threads.
#include <cmath>
#include <complex>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/cpu/elementwise_loop.h"
#include "ops/cpu/reduction_common.h"
#include "ops/cpu/register.h"
#include "ops/dispatch.h"
#include "ops/error.h"
#include "ops/kernels/elementwise.h"
#include "ops/kernels/scalar_traits.h"
#include "ops/op_registry.h"

namespace tensord::cpu {
namespace {

using kernels::ScalarTraits;

// ---- policies ----

template <class T>
struct SumIntP {  // bool and integers: int64, wrapping
  using Src = T;
  using Acc = uint64_t;
  Acc init() const { return 0; }
  Acc map(T v) const { return static_cast<uint64_t>(static_cast<int64_t>(v)); }
  Acc combine(Acc a, Acc b) const { return a + b; }
};
template <class T>
struct SumFloatP {  // every real float: double
  using Src = T;
  using Acc = double;
  Acc init() const { return 0.0; }
  Acc map(T v) const { return static_cast<double>(ScalarTraits<T>::load(v)); }
  Acc combine(Acc a, Acc b) const { return a + b; }
};
template <class T>
struct SumComplexP {
  using Src = T;
  using Acc = std::complex<double>;
  Acc init() const { return {}; }
  Acc map(T v) const { return {static_cast<double>(v.real()), static_cast<double>(v.imag())}; }
  Acc combine(Acc a, Acc b) const { return a + b; }
};

template <class T, bool kMax>
struct MaxMinP {  // NaN-propagating; bool folds as uint8 (0/1)
  using Src = T;
  using Acc = std::conditional_t<std::is_same_v<T, bool>, uint8_t, typename ScalarTraits<T>::compute_t>;
  Acc init() const {
    if constexpr (std::is_floating_point_v<Acc>) {
      return kMax ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
    } else {
      return kMax ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
    }
  }
  Acc map(T v) const { return ScalarTraits<T>::load(v); }
  Acc combine(Acc a, Acc b) const {
    if constexpr (std::is_floating_point_v<Acc>) {
      return (b != b || (kMax ? b > a : b < a)) ? b : a;
    } else {
      return (kMax ? b > a : b < a) ? b : a;
    }
  }
};

// Sum-like fold (sum, mean) of x, already in its compute dtype.
void sum_into(const OpContext& ctx, const Tensor& x, const ReducePlan& plan, const Tensor& out, bool mean) {
  const MeanFinalize fin{static_cast<double>(plan.count), mean};
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kernels::kIsComplex<T>) {
      run_reduce(ctx, SumComplexP<T>{}, x, plan, DType::kComplex128, out, fin);
    } else if constexpr (std::is_integral_v<T>) {
      run_reduce(ctx, SumIntP<T>{}, x, plan, DType::kInt64, out, NoFinalize{});
    } else {
      run_reduce(ctx, SumFloatP<T>{}, x, plan, DType::kFloat64, out, fin);
    }
  });
}

// ---- sum / mean ----

DType sum_dtype(DType in, const Attr& dtype) {
  if (!dtype.is_none()) return dtype.to_dtype("sum: dtype");
  return dtype_category(in) <= 1 ? DType::kInt64 : in;
}

DType mean_dtype(DType in, const Attr& dtype) {
  DType t = dtype.is_none() ? in : dtype.to_dtype("mean: dtype");
  if (dtype_category(t) < 2) {
    reduce_invalid("mean: could not infer output dtype; input dtype must be floating point or complex (got " +
                   std::string(dtype_name(t)) + "); pass dtype=");
  }
  return t;
}

OpDef make_sum_mean(bool mean) {
  const char* name = mean ? "mean" : "sum";
  OpDef d;
  d.name = name;
  d.doc = mean ? "mean over dims (all when dim is None or [])" : "sum over dims (all when dim is None or [])";
  d.params = {reduce_param("input", ParamKind::kTensor), reduce_param("dim", ParamKind::kIntList, {}, true),
              reduce_param("keepdim", ParamKind::kBool, Attr(false)),
              reduce_param("dtype", ParamKind::kDType, {}, true, true)};
  d.outputs = {"out"};
  d.dtypes = mean ? dtypes_join({dtypes_floating(), dtypes_float8(), dtypes_complex()}) : dtypes_all();
  d.dtype_note = mean ? "bool and integers with a floating dtype=" : "bool and integers sum to int64";
  auto out_dtype = [mean](DType in, const Attr& dt) { return mean ? mean_dtype(in, dt) : sum_dtype(in, dt); };
  d.infer = [name, out_dtype](const OpArgs<TensorMeta>& a) {
    const TensorMeta& x = a.tensor(0);
    ReducePlan p = plan_reduce(name, x.shape, a.attr(1), keepdim_of(a.attr(2)));
    return std::vector<TensorMeta>{reduce_meta(out_dtype(x.dtype, a.attr(3)), p.out_shape)};
  };
  d.kernels["cpu"] = [name, mean, out_dtype](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x0 = a.tensor(0);
    ReducePlan p = plan_reduce(name, x0.shape(), a.attr(1), keepdim_of(a.attr(2)));
    const DType ot = out_dtype(x0.dtype(), a.attr(3));
    // With dtype= the input is cast first, as PyTorch does.
    Tensor x = a.attr(3).is_none() ? x0 : cast_input(ctx, x0, ot);
    Tensor out = ctx.empty(ot, p.out_shape);
    sum_into(ctx, x, p, out, mean);
    return std::vector<Tensor>{out};
  };
  return d;
}

// ---- amax / amin ----

template <bool kMax>
OpDef make_amax_amin() {
  const char* name = kMax ? "amax" : "amin";
  OpDef d;
  d.name = name;
  d.doc = kMax ? "maximum over dims (NaN-propagating)" : "minimum over dims (NaN-propagating)";
  d.params = {reduce_param("input", ParamKind::kTensor),
              reduce_param("dim", ParamKind::kIntList, Attr(std::vector<int64_t>{})),
              reduce_param("keepdim", ParamKind::kBool, Attr(false))};
  d.outputs = {"out"};
  d.dtypes = dtypes_without(dtypes_all(), dtypes_complex());
  auto plan = [name](const TensorMeta& x, const Attr& dim, const Attr& keepdim) {
    if (is_complex(x.dtype)) reduce_invalid(std::string(name) + ": complex inputs are not supported");
    ReducePlan p = plan_reduce(name, x.shape, dim, keepdim_of(keepdim));
    check_nonempty(name, x.shape, p);
    return p;
  };
  d.infer = [plan](const OpArgs<TensorMeta>& a) {
    ReducePlan p = plan(a.tensor(0), a.attr(1), a.attr(2));
    return std::vector<TensorMeta>{reduce_meta(a.tensor(0).dtype, p.out_shape)};
  };
  d.kernels["cpu"] = [plan](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    ReducePlan p = plan(x.meta(), a.attr(1), a.attr(2));
    Tensor out = ctx.empty(x.dtype(), p.out_shape);
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!kernels::kIsComplex<T>) {
        run_reduce(ctx, MaxMinP<T, kMax>{}, x, p, ew_compute_dtype(x.dtype()), out, NoFinalize{});
      }
    });
    return std::vector<Tensor>{out};
  };
  return d;
}

}  // namespace

void register_reduction_sum_max(OpRegistry& r) {
  r.add(make_sum_mean(false));
  r.add(make_sum_mean(true));
  r.add(make_amax_amin<true>());
  r.add(make_amax_amin<false>());
  // One fold over their input when it all goes to one value: a replay may
  // record it (record_full_fold in reduction_common.h).
  for (const char* name : {"sum", "mean", "amax", "amin"}) r.find_mutable(name)->records_blocks = true;
}

}  // namespace tensord::cpu

namespace tensord {

void register_reduction_ops(OpRegistry& r) {
  cpu::register_reduction_sum_max(r);
  cpu::register_reduction_argmax(r);
  cpu::register_reduction_norm(r);
}

}  // namespace tensord
