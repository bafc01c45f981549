// Dtype casts: to(input, dtype) and copy_(self, src).
#include <string>
#include <vector>

#include "ops/cpu/elementwise_family.h"
#include "ops/cpu/elementwise_loop.h"
#include "ops/error.h"

namespace tensord::cpu {
namespace {

OpDef make_to() {
  OpDef d;
  d.name = "to";
  d.doc = "cast to dtype (PyTorch cast rules); returns input itself when the dtype already matches and copy is false";
  d.params = {ew_param("input", ParamKind::kTensor), ew_param("dtype", ParamKind::kDType),
              ew_param("non_blocking", ParamKind::kBool, Attr(false), false, true),
              ew_param("copy", ParamKind::kBool, Attr(false), false, true)};
  d.outputs = {"out"};
  d.dtypes = dtypes_all();
  d.dtype_note = "to any dtype";
  d.infer = [](const OpArgs<TensorMeta>& a) {
    return std::vector<TensorMeta>{ew_meta(a.attr(1).to_dtype("to: dtype"), a.tensor(0).shape)};
  };
  d.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    const DType t = a.attr(1).to_dtype("to: dtype");
    const bool copy = !a.attr(3).is_none() && a.attr(3).to_bool("to: copy");
    if (t == x.dtype() && !copy) return std::vector<Tensor>{x};
    Tensor out = ctx.empty(t, x.shape());
    ew_cast_copy(ctx, out, x);
    return std::vector<Tensor>{out};
  };
  return d;
}

void check_copy_shapes(const TensorMeta& self, const TensorMeta& src) {
  Shape b = broadcast_shapes(self.shape, src.shape, "copy_");
  if (b != self.shape) {
    throw Error(ErrorCode::kShapeMismatch, "copy_: src of shape " + shape_str(src.shape) +
                                               " cannot be broadcast to self of shape " + shape_str(self.shape));
  }
}

// The result is the new value of self; the graph engine rebinds the name
// (in-place commit), so the kernel writes a fresh tensor and never self's
// memory.
OpDef make_copy() {
  OpDef d;
  d.name = "copy_";
  d.doc = "self <- src broadcast to self's shape and cast to self's dtype (in place)";
  d.params = {ew_param("self", ParamKind::kTensor), ew_param("src", ParamKind::kScalarOrTensor),
              ew_param("non_blocking", ParamKind::kBool, Attr(false), false, false)};
  d.outputs = {"self"};
  d.dtypes = dtypes_all();
  d.dtype_note = "src converted to self's dtype";
  d.mutates = 0;
  d.infer = [](const OpArgs<TensorMeta>& a) {
    check_copy_shapes(a.tensor(0), a.tensor(1));
    return std::vector<TensorMeta>{ew_meta(a.tensor(0).dtype, a.tensor(0).shape)};
  };
  d.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& self = a.tensor(0);
    const Tensor& src = a.tensor(1);
    check_copy_shapes(self.meta(), src.meta());
    Tensor out = ctx.empty(self.dtype(), self.shape());
    ew_cast_copy(ctx, out, src);
    return std::vector<Tensor>{out};
  };
  return d;
}

}  // namespace

void register_elementwise_cast_ops(OpRegistry& r) {
  r.add(make_to());
  r.add(make_copy());
}

}  // namespace tensord::cpu
