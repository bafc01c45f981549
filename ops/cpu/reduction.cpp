// Reductions: sum mean amax amin argmax norm (dim = int or int list,
// negative allowed; None or [] = all dims; keepdim).
//
// Accumulators: integers and bool sum in int64 (wrapping), every floating
// sum/mean/norm in double (complex<double>), max/min in the compute type.
// The folding itself is ops/cpu/reduce_loop.h; results do not depend on the
// number of threads.
#include <cmath>
#include <complex>
#include <limits>
#include <string>
#include <vector>

#include "ops/convert.h"
#include "ops/cpu/elementwise_loop.h"
#include "ops/cpu/reduce_loop.h"
#include "ops/cpu/register.h"
#include "ops/dispatch.h"
#include "ops/error.h"
#include "ops/kernels/elementwise.h"
#include "ops/kernels/scalar_traits.h"
#include "ops/op_registry.h"
#include "ops/type_promotion.h"

namespace tensord {
namespace {

using cpu::reduce_dims;
using kernels::ScalarTraits;

ParamSpec param(std::string name, ParamKind kind, Attr def = {}, bool optional = false, bool kwarg_only = false) {
  ParamSpec p;
  p.name = std::move(name);
  p.kind = kind;
  p.default_value = std::move(def);
  p.optional = optional;
  p.kwarg_only = kwarg_only;
  return p;
}

TensorMeta meta(DType t, Shape s) {
  TensorMeta m;
  m.dtype = t;
  m.shape = std::move(s);
  return m;
}

[[noreturn]] void invalid(const std::string& msg) { throw Error(ErrorCode::kInvalidArgument, msg); }

// ---- dims ----

struct ReducePlan {
  std::vector<bool> reduced;  // per input dim
  Shape out_shape;
  int64_t count = 1;  // elements folded into each output
};

ReducePlan plan_reduce(const char* op, const Shape& in, const Attr& dim, bool keepdim) {
  const int64_t r = static_cast<int64_t>(in.size());
  ReducePlan p;
  p.reduced.assign(in.size(), false);
  std::vector<int64_t> dims;
  bool all = dim.is_none();
  if (!all) {
    const std::string what = std::string(op) + ": dim";
    dims = dim.to_int_list(what.c_str());
    all = dims.empty();
  }
  if (all) {
    p.reduced.assign(in.size(), true);
  } else {
    std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(r, 1)), false);
    for (int64_t d : dims) {
      const int64_t w = wrap_dim(d, r, op);
      if (seen[static_cast<size_t>(w)]) {
        invalid(std::string(op) + ": dim " + std::to_string(w) + " appears multiple times in the list of dims");
      }
      seen[static_cast<size_t>(w)] = true;
      if (r > 0) p.reduced[static_cast<size_t>(w)] = true;
    }
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (p.reduced[i]) {
      p.count *= in[i];
      if (keepdim) p.out_shape.push_back(1);
    } else {
      p.out_shape.push_back(in[i]);
    }
  }
  return p;
}

bool keepdim_of(const Attr& a) { return !a.is_none() && a.to_bool("keepdim"); }

// Reductions without an identity (amax, amin, inf-norms) reject empty folds.
void check_nonempty(const char* op, const Shape& in, const ReducePlan& p) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (p.reduced[i] && in[i] == 0) {
      invalid(std::string(op) + ": expected reduction dim " + std::to_string(i) +
              " to have non-zero size (the operation has no identity)");
    }
  }
}

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

enum class NormKind { kL2, kL1, kInf, kNegInf, kL0, kLp };

struct NormSpec {
  NormKind kind = NormKind::kL2;
  double p = 2.0;
};

// One policy per norm kind so each inner loop is branch-free.
template <class T, NormKind K>
struct NormP {
  using Src = T;
  using Acc = double;
  double p = 2.0;
  Acc init() const { return K == NormKind::kNegInf ? std::numeric_limits<double>::infinity() : 0.0; }
  Acc map(T v) const {
    if constexpr (kernels::kIsComplex<T>) {
      const double re = v.real(), im = v.imag();
      if constexpr (K == NormKind::kL2) return re * re + im * im;
      if constexpr (K == NormKind::kL0) return (re != 0 || im != 0) ? 1.0 : 0.0;
      if constexpr (K == NormKind::kLp) return std::pow(std::hypot(re, im), p);
      return std::hypot(re, im);
    } else {
      const double x = static_cast<double>(ScalarTraits<T>::load(v));
      if constexpr (K == NormKind::kL2) return x * x;
      if constexpr (K == NormKind::kL0) return x != 0 ? 1.0 : 0.0;
      if constexpr (K == NormKind::kLp) return std::pow(std::fabs(x), p);
      return std::fabs(x);
    }
  }
  Acc combine(Acc a, Acc b) const {
    if constexpr (K == NormKind::kInf) return (b != b || b > a) ? b : a;
    if constexpr (K == NormKind::kNegInf) return (b != b || b < a) ? b : a;
    return a + b;
  }
};

// Runs policy p over x into out. The accumulators (dtype acc_dtype) get
// `finalize` applied, then are converted to out's dtype (or written in
// place when the dtypes match).
template <class P, class Fin>
void run_reduce(const OpContext& ctx, const P& p, const Tensor& x, const ReducePlan& plan, DType acc_dtype,
                const Tensor& out, Fin finalize) {
  using Acc = typename P::Acc;
  using Src = typename P::Src;
  const int64_t n_out = out.numel();
  if (n_out == 0) return;
  const bool direct = acc_dtype == out.dtype();
  std::vector<Acc> tmp;
  Acc* acc = nullptr;
  if (direct) {
    acc = static_cast<Acc*>(out.data());
  } else {
    tmp.resize(static_cast<size_t>(n_out));
    acc = tmp.data();
  }
  if (x.numel() == 0) {
    std::fill(acc, acc + n_out, p.init());
  } else {
    reduce_dims(ctx, p, static_cast<const Src*>(x.data()), x.shape(), plan.reduced, acc);
  }
  finalize(acc, n_out);
  if (!direct) convert_elements(acc, acc_dtype, out.data(), out.dtype(), n_out);
}

struct NoFinalize {
  template <class Acc>
  void operator()(Acc*, int64_t) const {}
};

// x cast to dtype t (a fresh tensor) or x itself.
Tensor cast_input(const OpContext& ctx, const Tensor& x, DType t) {
  if (x.dtype() == t) return x;
  Tensor c = ctx.empty(t, x.shape());
  cpu::ew_cast_copy(ctx, c, x);
  return c;
}

// Sum-like fold (sum, mean) of x, already in its compute dtype.
void sum_into(const OpContext& ctx, const Tensor& x, const ReducePlan& plan, const Tensor& out, bool mean) {
  const double count = static_cast<double>(plan.count);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kernels::kIsComplex<T>) {
      auto fin = [&](std::complex<double>* a, int64_t n) {
        if (mean) {
          for (int64_t i = 0; i < n; ++i) a[i] /= count;
        }
      };
      run_reduce(ctx, SumComplexP<T>{}, x, plan, DType::kComplex128, out, fin);
    } else if constexpr (std::is_integral_v<T>) {
      run_reduce(ctx, SumIntP<T>{}, x, plan, DType::kInt64, out, NoFinalize{});
    } else {
      auto fin = [&](double* a, int64_t n) {
        if (mean) {
          for (int64_t i = 0; i < n; ++i) a[i] /= count;
        }
      };
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
    invalid("mean: could not infer output dtype; input dtype must be floating point or complex (got " +
            std::string(dtype_name(t)) + "); pass dtype=");
  }
  return t;
}

OpDef make_sum_mean(bool mean) {
  const char* name = mean ? "mean" : "sum";
  OpDef d;
  d.name = name;
  d.doc = mean ? "mean over dims (all when dim is None or [])" : "sum over dims (all when dim is None or [])";
  d.params = {param("input", ParamKind::kTensor), param("dim", ParamKind::kIntList, {}, true),
              param("keepdim", ParamKind::kBool, Attr(false)), param("dtype", ParamKind::kDType, {}, true, true)};
  d.outputs = {"out"};
  d.dtypes = mean ? "floating and complex (or dtype=)" : "all (bool and integers sum to int64)";
  auto out_dtype = [mean](DType in, const Attr& dt) { return mean ? mean_dtype(in, dt) : sum_dtype(in, dt); };
  d.infer = [name, out_dtype](const OpArgs<TensorMeta>& a) {
    const TensorMeta& x = a.tensor(0);
    ReducePlan p = plan_reduce(name, x.shape, a.attr(1), keepdim_of(a.attr(2)));
    return std::vector<TensorMeta>{meta(out_dtype(x.dtype, a.attr(3)), p.out_shape)};
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
  d.params = {param("input", ParamKind::kTensor), param("dim", ParamKind::kIntList, Attr(std::vector<int64_t>{})),
              param("keepdim", ParamKind::kBool, Attr(false))};
  d.outputs = {"out"};
  d.dtypes = "all but complex";
  auto plan = [name](const TensorMeta& x, const Attr& dim, const Attr& keepdim) {
    if (is_complex(x.dtype)) invalid(std::string(name) + ": complex inputs are not supported");
    ReducePlan p = plan_reduce(name, x.shape, dim, keepdim_of(keepdim));
    check_nonempty(name, x.shape, p);
    return p;
  };
  d.infer = [plan](const OpArgs<TensorMeta>& a) {
    ReducePlan p = plan(a.tensor(0), a.attr(1), a.attr(2));
    return std::vector<TensorMeta>{meta(a.tensor(0).dtype, p.out_shape)};
  };
  d.kernels["cpu"] = [plan](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    ReducePlan p = plan(x.meta(), a.attr(1), a.attr(2));
    Tensor out = ctx.empty(x.dtype(), p.out_shape);
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!kernels::kIsComplex<T>) {
        run_reduce(ctx, MaxMinP<T, kMax>{}, x, p, cpu::ew_compute_dtype(x.dtype()), out, NoFinalize{});
      }
    });
    return std::vector<Tensor>{out};
  };
  return d;
}

// ---- argmax ----

struct ArgPlan {
  int64_t A = 1, R = 1, B = 1;
  Shape out_shape;
};

ArgPlan plan_argmax(const TensorMeta& x, const Attr& dim, bool keepdim) {
  ArgPlan p;
  if (is_complex(x.dtype)) invalid("argmax: complex inputs are not supported");
  const int64_t r = x.dim();
  if (dim.is_none()) {
    if (x.numel() == 0) invalid("argmax: expected reduction dim to be specified for input.numel() == 0");
    p.R = x.numel();
    if (keepdim) p.out_shape.assign(static_cast<size_t>(r), 1);
    return p;
  }
  const int64_t w = wrap_dim(dim.to_int("argmax: dim"), r, "argmax");
  for (int64_t i = 0; i < r; ++i) {
    const int64_t s = x.shape[static_cast<size_t>(i)];
    if (i < w) p.A *= s;
    if (i == w) p.R = s;
    if (i > w) p.B *= s;
    if (i != w || keepdim) p.out_shape.push_back(i == w ? 1 : s);
  }
  if (r > 0 && p.R == 0) {
    invalid("argmax: expected reduction dim " + std::to_string(w) + " to have non-zero size");
  }
  return p;
}

// First index of the maximum; a NaN counts as the maximum (its first
// occurrence wins).
template <class T>
void argmax_kernel(const OpContext& ctx, const T* x, const ArgPlan& p, int64_t* out) {
  using C = typename ScalarTraits<T>::compute_t;
  auto better = [](C v, C best) { return (kernels::is_nan(v) && !kernels::is_nan(best)) || v > best; };
  const int64_t A = p.A, R = p.R, B = p.B;
  if (A * B == 0) return;
  if (B == 1) {
    struct Best {
      C v;
      int64_t i;
    };
    const int64_t rblk = cpu::kReduceTask;
    const int64_t nrb = (R + rblk - 1) / rblk;
    std::vector<Best> part(static_cast<size_t>(A * nrb));
    ctx.parallel_for(A * nrb, std::max<int64_t>(1, cpu::kReduceTask / std::min(R, rblk)), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t a = t / nrb, r0 = (t % nrb) * rblk, r1 = std::min(R, r0 + rblk);
        const T* row = x + a * R;
        Best b{ScalarTraits<T>::load(row[r0]), r0};
        for (int64_t r = r0 + 1; r < r1; ++r) {
          const C v = ScalarTraits<T>::load(row[r]);
          if (better(v, b.v)) b = Best{v, r};
        }
        part[static_cast<size_t>(t)] = b;
      }
    });
    for (int64_t a = 0; a < A; ++a) {
      Best b = part[static_cast<size_t>(a * nrb)];
      for (int64_t rb = 1; rb < nrb; ++rb) {
        const Best& c = part[static_cast<size_t>(a * nrb + rb)];
        if (better(c.v, b.v)) b = c;
      }
      out[a] = b.i;
    }
    return;
  }
  const int64_t bc = std::min(B, cpu::kReduceCols);
  const int64_t nbc = (B + bc - 1) / bc;
  ctx.parallel_for(A * nbc, std::max<int64_t>(1, cpu::kReduceTask / std::max<int64_t>(1, R * bc)),
                   [&](int64_t t0, int64_t t1) {
                     C bv[cpu::kReduceCols];
                     int64_t bi[cpu::kReduceCols];
                     for (int64_t t = t0; t < t1; ++t) {
                       const int64_t a = t / nbc, b0 = (t % nbc) * bc, bn = std::min(bc, B - b0);
                       const T* base = x + a * R * B + b0;
                       for (int64_t b = 0; b < bn; ++b) {
                         bv[b] = ScalarTraits<T>::load(base[b]);
                         bi[b] = 0;
                       }
                       for (int64_t r = 1; r < R; ++r) {
                         const T* row = base + r * B;
                         for (int64_t b = 0; b < bn; ++b) {
                           const C v = ScalarTraits<T>::load(row[b]);
                           if (better(v, bv[b])) {
                             bv[b] = v;
                             bi[b] = r;
                           }
                         }
                       }
                       std::copy(bi, bi + bn, out + a * B + b0);
                     }
                   });
}

OpDef make_argmax() {
  OpDef d;
  d.name = "argmax";
  d.doc = "index of the first maximum along dim (of the flattened input when dim is None); NaN is the maximum";
  d.params = {param("input", ParamKind::kTensor), param("dim", ParamKind::kInt, {}, true),
              param("keepdim", ParamKind::kBool, Attr(false))};
  d.outputs = {"out"};
  d.dtypes = "all but complex -> int64";
  d.infer = [](const OpArgs<TensorMeta>& a) {
    ArgPlan p = plan_argmax(a.tensor(0), a.attr(1), keepdim_of(a.attr(2)));
    return std::vector<TensorMeta>{meta(DType::kInt64, p.out_shape)};
  };
  d.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    ArgPlan p = plan_argmax(x.meta(), a.attr(1), keepdim_of(a.attr(2)));
    Tensor out = ctx.empty(DType::kInt64, p.out_shape);
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!kernels::kIsComplex<T>) argmax_kernel<T>(ctx, static_cast<const T*>(x.data()), p, out.data_ptr<int64_t>());
    });
    return std::vector<Tensor>{out};
  };
  return d;
}

// ---- norm ----

NormSpec parse_norm_p(const Attr& a) {
  NormSpec s;
  double p = 2.0;
  if (a.is_none()) return s;
  if (a.is_string()) {
    const std::string& v = a.to_string("norm: p");
    if (v == "fro") {
      p = 2.0;
    } else if (v == "inf" || v == "Infinity") {
      p = std::numeric_limits<double>::infinity();
    } else if (v == "-inf" || v == "-Infinity") {
      p = -std::numeric_limits<double>::infinity();
    } else {
      invalid("norm: unsupported p '" + v + "' (numbers, 'fro', 'inf' and '-inf' are supported)");
    }
  } else if (a.is_number()) {
    p = a.to_double("norm: p");
  } else {
    invalid("norm: p must be a number or one of 'fro', 'inf', '-inf'");
  }
  if (std::isnan(p)) invalid("norm: p must not be NaN");
  s.p = p;
  if (p == 2.0) {
    s.kind = NormKind::kL2;
  } else if (p == 1.0) {
    s.kind = NormKind::kL1;
  } else if (p == 0.0) {
    s.kind = NormKind::kL0;
  } else if (std::isinf(p)) {
    s.kind = p > 0 ? NormKind::kInf : NormKind::kNegInf;
  } else {
    s.kind = NormKind::kLp;
  }
  return s;
}

struct NormPlan {
  NormSpec spec;
  DType in_dtype;   // after dtype=
  DType out_dtype;  // real
  ReducePlan reduce;
};

NormPlan plan_norm(const TensorMeta& x, const Attr& p, const Attr& dim, const Attr& keepdim, const Attr& dtype) {
  NormPlan n;
  n.spec = parse_norm_p(p);
  n.in_dtype = dtype.is_none() ? x.dtype : dtype.to_dtype("norm: dtype");
  if (dtype_category(n.in_dtype) < 2) {
    invalid("norm: input dtype should be either floating point or complex, got " +
            std::string(dtype_name(n.in_dtype)));
  }
  n.out_dtype = to_real(n.in_dtype);
  n.reduce = plan_reduce("norm", x.shape, dim, keepdim_of(keepdim));
  if (n.spec.kind == NormKind::kInf || n.spec.kind == NormKind::kNegInf || n.spec.p < 0) {
    check_nonempty("norm", x.shape, n.reduce);
  }
  return n;
}

OpDef make_norm() {
  OpDef d;
  d.name = "norm";
  d.doc = "vector p-norm over dims (all when dim is None): p a number, 'fro', 'inf' or '-inf'";
  d.params = {param("input", ParamKind::kTensor), param("p", ParamKind::kFloat, Attr(int64_t{2})),
              param("dim", ParamKind::kIntList, {}, true), param("keepdim", ParamKind::kBool, Attr(false)),
              param("dtype", ParamKind::kDType, {}, true, true)};
  d.outputs = {"out"};
  d.dtypes = "floating and complex (complex -> real)";
  d.infer = [](const OpArgs<TensorMeta>& a) {
    NormPlan n = plan_norm(a.tensor(0), a.attr(1), a.attr(2), a.attr(3), a.attr(4));
    return std::vector<TensorMeta>{meta(n.out_dtype, n.reduce.out_shape)};
  };
  d.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    NormPlan n = plan_norm(a.tensor(0).meta(), a.attr(1), a.attr(2), a.attr(3), a.attr(4));
    Tensor x = cast_input(ctx, a.tensor(0), n.in_dtype);
    Tensor out = ctx.empty(n.out_dtype, n.reduce.out_shape);
    const NormSpec s = n.spec;
    auto fin = [s](double* acc, int64_t cnt) {
      if (s.kind == NormKind::kL2) {
        for (int64_t i = 0; i < cnt; ++i) acc[i] = std::sqrt(acc[i]);
      } else if (s.kind == NormKind::kLp) {
        for (int64_t i = 0; i < cnt; ++i) acc[i] = std::pow(acc[i], 1.0 / s.p);
      }
    };
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_integral_v<T>) {
        switch (s.kind) {
          case NormKind::kL2: return run_reduce(ctx, NormP<T, NormKind::kL2>{}, x, n.reduce, DType::kFloat64, out, fin);
          case NormKind::kL1: return run_reduce(ctx, NormP<T, NormKind::kL1>{}, x, n.reduce, DType::kFloat64, out, fin);
          case NormKind::kInf:
            return run_reduce(ctx, NormP<T, NormKind::kInf>{}, x, n.reduce, DType::kFloat64, out, fin);
          case NormKind::kNegInf:
            return run_reduce(ctx, NormP<T, NormKind::kNegInf>{}, x, n.reduce, DType::kFloat64, out, fin);
          case NormKind::kL0: return run_reduce(ctx, NormP<T, NormKind::kL0>{}, x, n.reduce, DType::kFloat64, out, fin);
          case NormKind::kLp:
            return run_reduce(ctx, NormP<T, NormKind::kLp>{s.p}, x, n.reduce, DType::kFloat64, out, fin);
        }
      }
    });
    return std::vector<Tensor>{out};
  };
  return d;
}

}  // namespace

void register_reduction_ops(OpRegistry& r) {
  r.add(make_sum_mean(false));
  r.add(make_sum_mean(true));
  r.add(make_amax_amin<true>());
  r.add(make_amax_amin<false>());
  r.add(make_argmax());
  r.add(make_norm());
}

}  // namespace tensord
