// Comparisons and logic (bool results) and where:
// eq ne lt le gt ge logical_and logical_or where.
#include <string>
#include <vector>

#include "ops/cpu/elementwise_family.h"
#include "ops/cpu/elementwise_kernels.h"
#include "ops/error.h"
#include "ops/type_promotion.h"

namespace tensord::cpu {
namespace {

// Compares in the promoted dtype of both operands; bool result.
template <template <class> class Op>
OpDef make_compare(const char* name, const char* doc, bool allow_complex) {
  OpDef d;
  d.name = name;
  d.doc = doc;
  d.params = {ew_param("input", ParamKind::kTensor), ew_param("other", ParamKind::kScalarOrTensor)};
  d.outputs = {"out"};
  d.dtypes = allow_complex ? dtypes_all() : dtypes_without(dtypes_all(), dtypes_complex());
  d.dtype_note = "compared in the promoted dtype; -> bool";
  auto plan = [name, allow_complex](const TensorMeta& a, const TensorMeta& b) {
    Shape s = broadcast_shapes(a.shape, b.shape, name);
    DType common = result_type(a, b);
    if (!allow_complex && is_complex(common)) {
      throw Error(ErrorCode::kInvalidArgument, std::string(name) + ": complex inputs are not supported");
    }
    return std::pair<DType, Shape>(common, std::move(s));
  };
  d.infer = [plan](const OpArgs<TensorMeta>& a) {
    auto p = plan(a.tensor(0), a.tensor(1));
    return std::vector<TensorMeta>{ew_meta(DType::kBool, p.second)};
  };
  d.kernels["cpu"] = [plan, name](const OpContext& ctx, const OpArgs<Tensor>& a) {
    auto p = plan(a.tensor(0).meta(), a.tensor(1).meta());
    Tensor out = ctx.empty(DType::kBool, p.second);
    run_binary_bool<Op>(ctx, name, out, a.tensor(0), a.tensor(1), p.first);
    return std::vector<Tensor>{out};
  };
  return d;
}

// Operands are read as "!= 0" (any dtype), bool result.
template <template <class> class Op>
OpDef make_logical(const char* name, const char* doc) {
  OpDef d;
  d.name = name;
  d.doc = doc;
  d.params = {ew_param("input", ParamKind::kTensor), ew_param("other", ParamKind::kScalarOrTensor)};
  d.outputs = {"out"};
  d.dtypes = dtypes_all();
  d.dtype_note = "nonzero is true; -> bool";
  d.infer = [name](const OpArgs<TensorMeta>& a) {
    return std::vector<TensorMeta>{ew_meta(DType::kBool, broadcast_shapes(a.tensor(0).shape, a.tensor(1).shape, name))};
  };
  d.kernels["cpu"] = [name](const OpContext& ctx, const OpArgs<Tensor>& a) {
    Tensor out = ctx.empty(DType::kBool, broadcast_shapes(a.tensor(0).shape(), a.tensor(1).shape(), name));
    run_binary_bool<Op>(ctx, name, out, a.tensor(0), a.tensor(1), DType::kBool);
    return std::vector<Tensor>{out};
  };
  return d;
}

// ---- where ----

struct WherePlan {
  DType dtype;
  Shape shape;
};

WherePlan plan_where(const TensorMeta& c, const TensorMeta& x, const TensorMeta& y) {
  if (c.dtype != DType::kBool) {
    throw Error(ErrorCode::kDtypeMismatch,
                "where: expected condition to be a bool tensor, got " + std::string(dtype_name(c.dtype)));
  }
  Shape s = broadcast_shapes(broadcast_shapes(c.shape, x.shape, "where"), y.shape, "where");
  return {result_type(x, y), std::move(s)};
}

OpDef make_where() {
  OpDef d;
  d.name = "where";
  d.doc = "condition ? input : other, broadcasting all three";
  d.params = {ew_param("condition", ParamKind::kTensor), ew_param("input", ParamKind::kScalarOrTensor),
              ew_param("other", ParamKind::kScalarOrTensor)};
  d.outputs = {"out"};
  d.dtypes = dtypes_all();
  d.dtype_note = "condition bool; input and other promoted";
  d.infer = [](const OpArgs<TensorMeta>& a) {
    WherePlan p = plan_where(a.tensor(0), a.tensor(1), a.tensor(2));
    return std::vector<TensorMeta>{ew_meta(p.dtype, p.shape)};
  };
  d.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& c = a.tensor(0);
    WherePlan p = plan_where(c.meta(), a.tensor(1).meta(), a.tensor(2).meta());
    Tensor out = ctx.empty(p.dtype, p.shape);
    EwInput cond;
    cond.tensor = &c;
    cond.kernel_dtype = DType::kBool;
    const EwInput ins[3] = {cond, ew_input(a.tensor(1), p.dtype), ew_input(a.tensor(2), p.dtype)};
    const DType kd = ew_compute_dtype(p.dtype);
    dispatch_compute(kd, [&](auto tag) {
      using T = typename decltype(tag)::type;
      ew_run(ctx, out, kd, ins, &where_block<T, T>, nullptr);
    });
    return std::vector<Tensor>{out};
  };
  return d;
}

}  // namespace

void register_elementwise_compare_ops(OpRegistry& r) {
  r.add(make_compare<kernels::EqOp>("eq", "input == other, broadcasting", true));
  r.add(make_compare<kernels::NeOp>("ne", "input != other, broadcasting", true));
  r.add(make_compare<kernels::LtOp>("lt", "input < other, broadcasting", false));
  r.add(make_compare<kernels::LeOp>("le", "input <= other, broadcasting", false));
  r.add(make_compare<kernels::GtOp>("gt", "input > other, broadcasting", false));
  r.add(make_compare<kernels::GeOp>("ge", "input >= other, broadcasting", false));
  r.add(make_logical<kernels::LogicalAndOp>("logical_and", "input && other (nonzero is true), broadcasting"));
  r.add(make_logical<kernels::LogicalOrOp>("logical_or", "input || other (nonzero is true), broadcasting"));
  r.add(make_where());
}

}  // namespace tensord::cpu
