// norm(input, p=2, dim=None, keepdim=False, *, dtype=None): the vector
// p-norm (torch.norm / linalg.vector_norm), accumulated in double; complex
// inputs give their real dtype.
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/cpu/reduction_common.h"
#include "ops/dispatch.h"
#include "ops/kernels/elementwise.h"
#include "ops/kernels/scalar_traits.h"

namespace tensord::cpu {
namespace {

using kernels::ScalarTraits;

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
      reduce_invalid("norm: unsupported p '" + v + "' (numbers, 'fro', 'inf' and '-inf' are supported)");
    }
  } else if (a.is_number()) {
    p = a.to_double("norm: p");
  } else {
    reduce_invalid("norm: p must be a number or one of 'fro', 'inf', '-inf'");
  }
  if (std::isnan(p)) reduce_invalid("norm: p must not be NaN");
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
    reduce_invalid("norm: input dtype should be either floating point or complex, got " +
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
  d.params = {reduce_param("input", ParamKind::kTensor), reduce_param("p", ParamKind::kFloat, Attr(int64_t{2})),
              reduce_param("dim", ParamKind::kIntList, {}, true),
              reduce_param("keepdim", ParamKind::kBool, Attr(false)),
              reduce_param("dtype", ParamKind::kDType, {}, true, true)};
  d.outputs = {"out"};
  d.dtypes = dtypes_join({dtypes_floating(), dtypes_float8(), dtypes_complex()});
  d.dtype_note = "complex -> its real dtype";
  d.infer = [](const OpArgs<TensorMeta>& a) {
    NormPlan n = plan_norm(a.tensor(0), a.attr(1), a.attr(2), a.attr(3), a.attr(4));
    return std::vector<TensorMeta>{reduce_meta(n.out_dtype, n.reduce.out_shape)};
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
          case NormKind::kL2:
            return run_reduce(ctx, NormP<T, NormKind::kL2>{}, x, n.reduce, DType::kFloat64, out, fin);
          case NormKind::kL1:
            return run_reduce(ctx, NormP<T, NormKind::kL1>{}, x, n.reduce, DType::kFloat64, out, fin);
          case NormKind::kInf:
            return run_reduce(ctx, NormP<T, NormKind::kInf>{}, x, n.reduce, DType::kFloat64, out, fin);
          case NormKind::kNegInf:
            return run_reduce(ctx, NormP<T, NormKind::kNegInf>{}, x, n.reduce, DType::kFloat64, out, fin);
          case NormKind::kL0:
            return run_reduce(ctx, NormP<T, NormKind::kL0>{}, x, n.reduce, DType::kFloat64, out, fin);
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

void register_reduction_norm(OpRegistry& r) {
  r.add(make_norm());
}

}  // namespace tensord::cpu
