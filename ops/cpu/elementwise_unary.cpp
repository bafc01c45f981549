// Unary elementwise ops and clamp:
// neg abs exp log sqrt rsqrt relu sigmoid tanh logical_not clamp.
#include <algorithm>
#include <string>
#include <vector>

#include "ops/cpu/elementwise_family.h"
#include "ops/cpu/elementwise_kernels.h"
#include "ops/cpu/vec_math.h"
#include "ops/error.h"
#include "ops/type_promotion.h"

namespace tensord::cpu {
namespace {

[[noreturn]] void unsupported_dtype(const char* op, DType t) {
  throw Error(ErrorCode::kInvalidArgument,
              std::string(op) + ": dtype " + std::string(dtype_name(t)) + " is not supported");
}

enum class UnaryRule {
  kSame,      // result dtype = input dtype (neg, relu)
  kFloating,  // integers and bool promote to float32 (exp, log, ...)
};

struct UnaryDtypes {
  UnaryRule rule;
  bool allow_bool;
  bool allow_complex;
};

DType unary_dtype(const char* op, DType in, UnaryDtypes r) {
  if (!r.allow_bool && in == DType::kBool) unsupported_dtype(op, in);
  if (!r.allow_complex && is_complex(in)) unsupported_dtype(op, in);
  return r.rule == UnaryRule::kFloating ? to_floating_default(in) : in;
}

using BulkF32 = void (*)(const float*, float*, int64_t);

// Block adapter for the bulk float32 functions of vec_math.h.
template <BulkF32 F>
void bulk_f32_block(const void*, void* out, const void* const* in, const int64_t* st, int64_t n) {
  float* o = static_cast<float*>(out);
  const float* a = static_cast<const float*>(in[0]);
  if (st[0]) {
    F(a, o, n);
  } else {
    F(a, o, 1);
    std::fill(o + 1, o + n, o[0]);
  }
}

// Unary op; float32 compute (float32, float16, bfloat16, float8 results)
// goes through `f32` when given.
template <template <class> class Op>
OpDef make_unary(const char* name, const char* doc, const char* dtype_note, UnaryDtypes r, int64_t grain,
                 EwBlockFn f32 = nullptr) {
  OpDef d;
  d.name = name;
  d.doc = doc;
  d.params = {ew_param("input", ParamKind::kTensor)};
  d.outputs = {"out"};
  d.dtypes = dtypes_all();
  if (!r.allow_bool) d.dtypes = dtypes_without(d.dtypes, {DType::kBool});
  if (!r.allow_complex) d.dtypes = dtypes_without(d.dtypes, dtypes_complex());
  d.dtype_note = dtype_note;
  d.infer = [name, r](const OpArgs<TensorMeta>& a) {
    return std::vector<TensorMeta>{ew_meta(unary_dtype(name, a.tensor(0).dtype, r), a.tensor(0).shape)};
  };
  d.kernels["cpu"] = [name, r, grain, f32](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    Tensor out = ctx.empty(unary_dtype(name, x.dtype(), r), x.shape());
    if (f32 && ew_compute_dtype(out.dtype()) == DType::kFloat32) {
      const EwInput ins[1] = {ew_input(x, out.dtype())};
      ew_run(ctx, out, DType::kFloat32, ins, f32, nullptr, grain);
    } else {
      run_unary_same<Op>(ctx, name, out, x, grain);
    }
    return std::vector<Tensor>{out};
  };
  return d;
}

// abs: complex -> its real dtype.
OpDef make_abs() {
  OpDef d;
  d.name = "abs";
  d.doc = "|input|; complex inputs give their real dtype";
  d.params = {ew_param("input", ParamKind::kTensor)};
  d.outputs = {"out"};
  d.dtypes = dtypes_all();
  d.dtype_note = "complex -> its real dtype";
  d.infer = [](const OpArgs<TensorMeta>& a) {
    return std::vector<TensorMeta>{ew_meta(to_real(a.tensor(0).dtype), a.tensor(0).shape)};
  };
  d.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    Tensor out = ctx.empty(to_real(x.dtype()), x.shape());
    if (!is_complex(x.dtype())) {
      run_unary_same<kernels::AbsOp>(ctx, "abs", out, x);
    } else {
      const EwInput ins[1] = {ew_input(x, x.dtype())};
      dispatch_compute(x.dtype(), [&](auto tag) {
        using In = typename decltype(tag)::type;
        if constexpr (kernels::kIsComplex<In>) {
          const kernels::AbsOp<In> op{};
          ew_run(ctx, out, out.dtype(), ins, &unary_block<kernels::AbsOp<In>, In, kernels::RealT<In>>, &op,
                 kEwGrainHeavy);
        }
      });
    }
    return std::vector<Tensor>{out};
  };
  return d;
}

OpDef make_logical_not() {
  OpDef d;
  d.name = "logical_not";
  d.doc = "!input (nonzero is true)";
  d.params = {ew_param("input", ParamKind::kTensor)};
  d.outputs = {"out"};
  d.dtypes = dtypes_all();
  d.dtype_note = "nonzero is true; -> bool";
  d.infer = [](const OpArgs<TensorMeta>& a) {
    return std::vector<TensorMeta>{ew_meta(DType::kBool, a.tensor(0).shape)};
  };
  d.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    Tensor out = ctx.empty(DType::kBool, x.shape());
    run_unary_same<kernels::LogicalNotOp>(ctx, "logical_not", out, x);
    return std::vector<Tensor>{out};
  };
  return d;
}

// ---- clamp(input, min=None, max=None) ----

struct ClampPlan {
  DType dtype;
  Shape shape;
};

ClampPlan plan_clamp(const TensorMeta& x, const TensorMeta* lo, const TensorMeta* hi) {
  if (!lo && !hi) {
    throw Error(ErrorCode::kInvalidArgument, "clamp: at least one of 'min' or 'max' must not be None");
  }
  std::vector<TensorMeta> ops{x};
  Shape s = x.shape;
  if (lo) {
    ops.push_back(*lo);
    s = broadcast_shapes(s, lo->shape, "clamp");
  }
  if (hi) {
    ops.push_back(*hi);
    s = broadcast_shapes(s, hi->shape, "clamp");
  }
  DType t = result_type(ops);
  if (is_complex(t) || t == DType::kBool) unsupported_dtype("clamp", t);
  return {t, std::move(s)};
}

template <class T>
const T* opt_arg(const OpArgs<T>& a, size_t i) {
  return a.has_tensor(i) ? &a.tensor(i) : nullptr;
}

OpDef make_clamp() {
  OpDef d;
  d.name = "clamp";
  d.doc = "min(max(input, min), max); min/max are numbers or tensors (broadcast), either may be None";
  d.params = {ew_param("input", ParamKind::kTensor), ew_param("min", ParamKind::kScalarOrTensor, {}, true),
              ew_param("max", ParamKind::kScalarOrTensor, {}, true)};
  d.outputs = {"out"};
  d.dtypes = dtypes_without(dtypes_all(), dtypes_join({{DType::kBool}, dtypes_complex()}));
  d.dtype_note = "promoted with min and max";
  d.infer = [](const OpArgs<TensorMeta>& a) {
    ClampPlan p = plan_clamp(a.tensor(0), opt_arg(a, 1), opt_arg(a, 2));
    return std::vector<TensorMeta>{ew_meta(p.dtype, p.shape)};
  };
  d.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    const Tensor* lo = opt_arg(a, 1);
    const Tensor* hi = opt_arg(a, 2);
    const TensorMeta lo_m = lo ? lo->meta() : TensorMeta{};
    const TensorMeta hi_m = hi ? hi->meta() : TensorMeta{};
    ClampPlan p = plan_clamp(x.meta(), lo ? &lo_m : nullptr, hi ? &hi_m : nullptr);
    Tensor out = ctx.empty(p.dtype, p.shape);
    if (lo && hi) {
      const EwInput ins[3] = {ew_input(x, p.dtype), ew_input(*lo, p.dtype), ew_input(*hi, p.dtype)};
      const DType kd = ew_compute_dtype(p.dtype);
      dispatch_compute(kd, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (!kernels::kIsComplex<T>) ew_run(ctx, out, kd, ins, &clamp_block<T, T>, nullptr);
      });
    } else if (lo) {
      run_binary_same<kernels::ClampMinOp>(ctx, "clamp", out, x, *lo, kernels::EwParams{}, false);
    } else {
      run_binary_same<kernels::ClampMaxOp>(ctx, "clamp", out, x, *hi, kernels::EwParams{}, false);
    }
    return std::vector<Tensor>{out};
  };
  return d;
}

}  // namespace

void register_elementwise_unary_ops(OpRegistry& r) {
  const UnaryDtypes floating{UnaryRule::kFloating, true, true};
  const char* kFloatingNote = "bool and integers promote to float32";
  r.add(make_unary<kernels::NegOp>("neg", "-input", "", {UnaryRule::kSame, false, true}, kEwGrain));
  r.add(make_abs());
  r.add(make_unary<kernels::ExpOp>("exp", "e ** input", kFloatingNote, floating, kEwGrainHeavy,
                                   &bulk_f32_block<&exp_f32_n>));
  r.add(make_unary<kernels::LogOp>("log", "natural logarithm", kFloatingNote, floating, kEwGrainHeavy));
  r.add(make_unary<kernels::SqrtOp>("sqrt", "square root", kFloatingNote, floating, kEwGrainHeavy));
  r.add(make_unary<kernels::RsqrtOp>("rsqrt", "1 / sqrt(input)", kFloatingNote, floating, kEwGrainHeavy));
  r.add(make_unary<kernels::SigmoidOp>("sigmoid", "1 / (1 + exp(-input))", kFloatingNote, floating, kEwGrainHeavy,
                                       &bulk_f32_block<&sigmoid_f32_n>));
  r.add(make_unary<kernels::TanhOp>("tanh", "hyperbolic tangent", kFloatingNote, floating, kEwGrainHeavy,
                                    &bulk_f32_block<&tanh_f32_n>));
  r.add(make_unary<kernels::ReluOp>("relu", "max(input, 0)", "", {UnaryRule::kSame, false, false}, kEwGrain));
  r.add(make_logical_not());
  r.add(make_clamp());
}

}  // namespace tensord::cpu
