// Binary arithmetic with broadcasting and PyTorch type promotion:
// add sub mul div pow maximum minimum.
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/convert.h"
#include "ops/cpu/elementwise_family.h"
#include "ops/cpu/elementwise_kernels.h"
#include "ops/error.h"
#include "ops/graph_hooks.h"
#include "ops/recorded_block.h"
#include "ops/type_promotion.h"

namespace tensord::cpu {
namespace {

using kernels::EwParams;

struct BinaryPlan {
  DType common;
  Shape shape;
};

BinaryPlan plan_binary(const char* op, const TensorMeta& a, const TensorMeta& b) {
  return {result_type(a, b), broadcast_shapes(a.shape, b.shape, op)};
}

[[noreturn]] void unsupported_dtype(const char* op, DType t, const char* why = "is not supported") {
  throw Error(ErrorCode::kInvalidArgument, std::string(op) + ": dtype " + std::string(dtype_name(t)) + " " + why);
}

// Validates add/sub's alpha against the result dtype (PyTorch's
// alpha_check) and converts it for the kernel.
EwParams alpha_params(const char* op, const Attr& alpha, DType common) {
  EwParams p;
  if (alpha.is_none()) return p;
  if (!alpha.is_number()) {
    throw Error(ErrorCode::kInvalidArgument, std::string(op) + ": alpha must be a number");
  }
  const double v = alpha.to_double("alpha");
  if (alpha.is_bool() && common != DType::kBool) {
    throw Error(ErrorCode::kInvalidArgument, std::string(op) + ": boolean alpha only supported for boolean results");
  }
  if (common == DType::kBool && !(v == 0.0 || v == 1.0)) {
    throw Error(ErrorCode::kInvalidArgument, std::string(op) + ": for boolean inputs, alpha must be a boolean");
  }
  if (dtype_category(common) <= 1 && v != std::floor(v)) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(op) + ": for integral input tensors, argument alpha must not be a floating point number");
  }
  p.alpha_f = v;
  p.alpha_b = v != 0.0;
  p.alpha_i = dtype_category(common) <= 1 ? alpha.to_int("alpha") : 0;
  return p;
}

bool alpha_is_one(const Attr& a) {
  return a.is_none() || (a.is_number() && a.to_double("alpha") == 1.0);
}

std::vector<TensorMeta> one(DType t, Shape s) {
  return {ew_meta(t, std::move(s))};
}

// ---- add / sub ----

template <bool kSub>
OpDef make_add_sub() {
  const char* name = kSub ? "sub" : "add";
  OpDef d;
  d.name = name;
  d.doc = kSub ? "input - alpha * other, broadcasting" : "input + alpha * other, broadcasting";
  d.params = {ew_param("input", ParamKind::kTensor), ew_param("other", ParamKind::kScalarOrTensor),
              ew_param("alpha", ParamKind::kFloat, Attr(int64_t{1}), false, true)};
  d.outputs = {"out"};
  d.dtypes = kSub ? dtypes_without(dtypes_all(), {DType::kBool}) : dtypes_all();
  d.dtype_note = "promoted";
  auto plan = [name](const TensorMeta& a, const TensorMeta& b, const Attr& alpha) {
    if (kSub && (a.dtype == DType::kBool || b.dtype == DType::kBool)) {
      throw Error(ErrorCode::kInvalidArgument,
                  "sub: subtraction with a bool tensor is not supported; use logical_xor or logical_not");
    }
    BinaryPlan p = plan_binary(name, a, b);
    alpha_params(name, alpha, p.common);
    return p;
  };
  d.infer = [plan](const OpArgs<TensorMeta>& a) {
    BinaryPlan p = plan(a.tensor(0), a.tensor(1), a.attr(2));
    return one(p.common, p.shape);
  };
  d.kernels["cpu"] = [plan, name](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    const Tensor& y = a.tensor(1);
    BinaryPlan p = plan(x.meta(), y.meta(), a.attr(2));
    EwParams params = alpha_params(name, a.attr(2), p.common);
    Tensor out = ctx.empty(p.common, p.shape);
    if (alpha_is_one(a.attr(2))) {
      if constexpr (kSub) {
        run_binary_same<kernels::PlainSubOp>(ctx, name, out, x, y, params, false);
      } else {
        run_binary_same<kernels::PlainAddOp>(ctx, name, out, x, y, params, false);
      }
    } else {
      if constexpr (kSub) {
        run_binary_same<kernels::SubOp>(ctx, name, out, x, y, params, false);
      } else {
        run_binary_same<kernels::AddOp>(ctx, name, out, x, y, params, false);
      }
    }
    return std::vector<Tensor>{out};
  };
  return d;
}

// ---- mul / maximum / minimum: same-dtype result, no extra params ----

template <template <class> class Op>
OpDef make_simple_binary(const char* name, const char* doc, bool allow_complex, bool keep_scalar_precision) {
  OpDef d;
  d.name = name;
  d.doc = doc;
  d.params = {ew_param("input", ParamKind::kTensor), ew_param("other", ParamKind::kScalarOrTensor)};
  d.outputs = {"out"};
  d.dtypes = allow_complex ? dtypes_all() : dtypes_without(dtypes_all(), dtypes_complex());
  d.dtype_note = "promoted";
  auto plan = [name, allow_complex](const TensorMeta& a, const TensorMeta& b) {
    BinaryPlan p = plan_binary(name, a, b);
    if (!allow_complex && is_complex(p.common)) unsupported_dtype(name, p.common);
    return p;
  };
  d.infer = [plan](const OpArgs<TensorMeta>& a) {
    BinaryPlan p = plan(a.tensor(0), a.tensor(1));
    return one(p.common, p.shape);
  };
  d.kernels["cpu"] = [plan, name, keep_scalar_precision](const OpContext& ctx, const OpArgs<Tensor>& a) {
    BinaryPlan p = plan(a.tensor(0).meta(), a.tensor(1).meta());
    Tensor out = ctx.empty(p.common, p.shape);
    run_binary_same<Op>(ctx, name, out, a.tensor(0), a.tensor(1), EwParams{}, keep_scalar_precision);
    return std::vector<Tensor>{out};
  };
  return d;
}

// ---- div ----

enum class RoundingMode { kNone, kTrunc, kFloor };

RoundingMode rounding_mode(const Attr& a) {
  if (a.is_none()) return RoundingMode::kNone;
  if (a.is_string()) {
    const std::string& s = a.to_string("rounding_mode");
    if (s == "trunc") return RoundingMode::kTrunc;
    if (s == "floor") return RoundingMode::kFloor;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "div: expected rounding_mode to be one of None, 'trunc', or 'floor' but found " + a.repr());
}

// Result dtype of div: true division promotes integers to float32.
DType div_dtype(DType common, RoundingMode mode) {
  if (mode == RoundingMode::kNone) return to_floating_default(common);
  if (is_complex(common)) unsupported_dtype("div", common, "does not support rounding_mode with complex inputs");
  if (common == DType::kBool) unsupported_dtype("div", common, "does not support rounding_mode with bool inputs");
  return common;
}

// Integer floor/trunc division by zero is an error, as in PyTorch.
void check_nonzero_divisor(const Tensor& b) {
  dispatch_dtype(b.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      const T* p = b.data_ptr<T>();
      const int64_t n = b.numel();
      bool zero = false;
      for (int64_t i = 0; i < n; ++i) zero |= p[i] == T(0);
      if (zero) throw Error(ErrorCode::kInvalidArgument, "div: integer division by zero");
    }
  });
}

OpDef make_div() {
  OpDef d;
  d.name = "div";
  d.doc = "input / other, broadcasting; rounding_mode None (true division), 'trunc' or 'floor'";
  d.params = {ew_param("input", ParamKind::kTensor), ew_param("other", ParamKind::kScalarOrTensor),
              ew_param("rounding_mode", ParamKind::kString, {}, true, true)};
  d.outputs = {"out"};
  d.dtypes = dtypes_all();
  d.dtype_note = "promoted; bool and integers to float32 without rounding_mode; trunc and floor: no bool or complex";
  auto plan = [](const TensorMeta& a, const TensorMeta& b, const Attr& mode) {
    BinaryPlan p = plan_binary("div", a, b);
    p.common = div_dtype(p.common, rounding_mode(mode));
    return p;
  };
  d.infer = [plan](const OpArgs<TensorMeta>& a) {
    BinaryPlan p = plan(a.tensor(0), a.tensor(1), a.attr(2));
    return one(p.common, p.shape);
  };
  d.kernels["cpu"] = [plan](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    const Tensor& y = a.tensor(1);
    BinaryPlan p = plan(x.meta(), y.meta(), a.attr(2));
    RoundingMode mode = rounding_mode(a.attr(2));
    Tensor out = ctx.empty(p.common, p.shape);
    if (mode != RoundingMode::kNone && is_integral(p.common, false)) {
      check_nonzero_divisor(y);
      // The check reads the divisor's data: a replay must run it each time.
      if (BlockRecorder* rec = graph_recorder(ctx.graph)) rec->reject();
    }
    switch (mode) {
      case RoundingMode::kNone:
        run_binary_same<kernels::DivOp>(ctx, "div", out, x, y, EwParams{}, true);
        break;
      case RoundingMode::kTrunc:
        run_binary_same<kernels::DivTruncOp>(ctx, "div", out, x, y, EwParams{}, false, kEwGrainHeavy);
        break;
      case RoundingMode::kFloor:
        run_binary_same<kernels::DivFloorOp>(ctx, "div", out, x, y, EwParams{}, false, kEwGrainHeavy);
        break;
    }
    return std::vector<Tensor>{out};
  };
  return d;
}

// ---- pow ----

// pow(tensor, Python number), floating or complex result: PyTorch's
// pow_tensor_scalar kernel (special exponents, general case in double).
// float16/bfloat16 results see the exponent rounded to their type, as
// there.
void pow_tensor_scalar(const OpContext& ctx, const Tensor& out, const Tensor& x, double e) {
  using kernels::PowScalarKind;
  const DType common = out.dtype();
  if (common == DType::kFloat16 || common == DType::kBFloat16) {
    double r = 0;
    store_from_double(common, &r, 0, e);  // round e to the narrow type
    e = load_as_double(common, &r, 0);
  }
  const DType kd = ew_compute_dtype(common);
  const EwInput ins[1] = {ew_input(x, common)};
  dispatch_compute(kd, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kernels::kIsFloat<T> || kernels::kIsComplex<T>) {
      auto run = [&](auto kind_tag) {
        constexpr PowScalarKind K = decltype(kind_tag)::value;
        const kernels::PowScalarOp<T, K> op{e};
        ew_run(ctx, out, kd, ins, &unary_block<kernels::PowScalarOp<T, K>, T, T>, &op, kEwGrainHeavy);
      };
      switch (kernels::pow_scalar_kind(e)) {
        case PowScalarKind::kSqrt:
          return run(std::integral_constant<PowScalarKind, PowScalarKind::kSqrt>{});
        case PowScalarKind::kRsqrt:
          return run(std::integral_constant<PowScalarKind, PowScalarKind::kRsqrt>{});
        case PowScalarKind::kReciprocal:
          return run(std::integral_constant<PowScalarKind, PowScalarKind::kReciprocal>{});
        case PowScalarKind::kSquare:
          return run(std::integral_constant<PowScalarKind, PowScalarKind::kSquare>{});
        case PowScalarKind::kCube:
          return run(std::integral_constant<PowScalarKind, PowScalarKind::kCube>{});
        case PowScalarKind::kInvSquare:
          return run(std::integral_constant<PowScalarKind, PowScalarKind::kInvSquare>{});
        case PowScalarKind::kGeneral:
          return run(std::integral_constant<PowScalarKind, PowScalarKind::kGeneral>{});
      }
    } else {
      ew_unsupported("pow", common);
    }
  });
}

OpDef make_pow() {
  OpDef d;
  d.name = "pow";
  d.doc = "input ** exponent, broadcasting";
  d.params = {ew_param("input", ParamKind::kScalarOrTensor), ew_param("exponent", ParamKind::kScalarOrTensor)};
  d.outputs = {"out"};
  d.dtypes = dtypes_without(dtypes_all(), {DType::kBool});
  d.dtype_note = "promoted";
  auto plan = [](const TensorMeta& a, const TensorMeta& b) {
    BinaryPlan p = plan_binary("pow", a, b);
    if (p.common == DType::kBool) unsupported_dtype("pow", p.common);
    return p;
  };
  d.infer = [plan](const OpArgs<TensorMeta>& a) {
    BinaryPlan p = plan(a.tensor(0), a.tensor(1));
    return one(p.common, p.shape);
  };
  d.kernels["cpu"] = [plan](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    const Tensor& e = a.tensor(1);
    BinaryPlan p = plan(x.meta(), e.meta());
    if (is_integral(p.common, false) && e.meta().wrapped_number && load_as_double(e.dtype(), e.data(), 0) < 0) {
      throw Error(ErrorCode::kInvalidArgument, "pow: integers to negative integer powers are not allowed");
    }
    Tensor out = ctx.empty(p.common, p.shape);
    if (e.meta().wrapped_number && dtype_category(p.common) >= 2 && x.shape() == p.shape) {
      pow_tensor_scalar(ctx, out, x, load_as_double(e.dtype(), e.data(), 0));
    } else {
      run_binary_same<kernels::PowOp>(ctx, "pow", out, x, e, EwParams{}, false, kEwGrainHeavy);
    }
    return std::vector<Tensor>{out};
  };
  return d;
}

}  // namespace

void register_elementwise_binary_ops(OpRegistry& r) {
  r.add(make_add_sub<false>());
  r.add(make_add_sub<true>());
  r.add(make_simple_binary<kernels::MulOp>("mul", "input * other, broadcasting", true, true));
  r.add(make_div());
  r.add(make_pow());
  r.add(make_simple_binary<kernels::MaximumOp>("maximum", "elementwise max, NaN-propagating, broadcasting", false,
                                               false));
  r.add(make_simple_binary<kernels::MinimumOp>("minimum", "elementwise min, NaN-propagating, broadcasting", false,
                                               false));
}

}  // namespace tensord::cpu
