// Microscaling ops (API.md 7): mx.quantize(input, format, block_size=32,
// axis=-1, scale_rounding="floor") -> an MX tensor, and mx.dequantize(q) ->
// float32. An MX tensor is one value (ops/mx_tensor.h): packed uint8
// elements (ops/kernels/mx.h's bit order) then e8m0 scales in one
// allocation, with the format, block size, axis and logical shape in its
// meta. Loops: ops/cpu/mx_loop.cpp.
#include <string>

#include "ops/cpu/mx_loop.h"
#include "ops/cpu/register.h"
#include "ops/error.h"
#include "ops/mx_tensor.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

// ---- mx.quantize ----

void add_quantize(OpRegistry& r) {
  OpDef op;
  op.name = "mx.quantize";
  op.doc = "OCP MX v1.0 block quantization: an MX tensor (packed elements, one e8m0 scale per block along axis).";
  op.params = {ParamSpec{"input", ParamKind::kTensor, Attr(), false, false},
               ParamSpec{"format", ParamKind::kString, Attr(), false, false},
               ParamSpec{"block_size", ParamKind::kInt, Attr(32), false, false},
               ParamSpec{"axis", ParamKind::kInt, Attr(-1), false, false},
               ParamSpec{"scale_rounding", ParamKind::kString, Attr("floor"), false, false}};
  op.outputs = {"out"};
  op.dtypes = {DType::kFloat16, DType::kBFloat16, DType::kFloat32};
  op.dtype_note = "-> an MX tensor of `format`";
  op.infer = [](const OpArgs<TensorMeta>& a) {
    return std::vector<TensorMeta>{mx_tensor_meta(mx_quantize_plan(a.tensor(0), a.attrs).mx)};
  };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    MxQuantizePlan p = mx_quantize_plan(x.meta(), a.attrs);
    // One allocation: the packed elements, then the scales.
    Tensor bytes = ctx.empty(DType::kUInt8, {static_cast<int64_t>(p.mx->nbytes())});
    Tensor q = mx_over(p.mx, bytes.storage(), bytes.byte_offset());
    Tensor elements = mx_elements(q);
    Tensor scale = mx_scale(q);
    mx_quantize_cpu(ctx, x, p.mx->format, p.rounding, mx_layout_of(*p.mx), elements, scale);
    return std::vector<Tensor>{q};
  };
  r.add(std::move(op));
}

// ---- mx.dequantize ----

const MxMeta& mx_operand(const TensorMeta& q) {
  if (!q.mx) {
    throw Error(ErrorCode::kDtypeMismatch,
                "mx.dequantize: expected an MX tensor (mx.quantize's result or a stored MX tensor), got " + q.str());
  }
  return *q.mx;
}

void add_dequantize(OpRegistry& r) {
  OpDef op;
  op.name = "mx.dequantize";
  op.doc = "The float32 values of an MX tensor, in its logical shape.";
  op.params = {ParamSpec{"q", ParamKind::kTensor, Attr(), false, false}};
  op.outputs = {"out"};
  op.dtypes = {DType::kUInt8};  // an MX tensor's bytes (ops/mx_tensor.h)
  op.dtype_note = "an MX tensor (uint8 bytes) of any format -> float32";
  op.takes_mx = true;
  op.infer = [](const OpArgs<TensorMeta>& a) {
    return std::vector<TensorMeta>{TensorMeta{DType::kFloat32, mx_operand(a.tensor(0)).shape}};
  };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& q = a.tensor(0);
    const MxMeta& m = mx_operand(q.meta());
    Tensor out = ctx.empty(DType::kFloat32, m.shape);
    Tensor out_view = out;
    mx_dequantize_cpu(ctx, mx_elements(q), mx_scale(q), m.format, mx_layout_of(m), out_view);
    return std::vector<Tensor>{out};
  };
  r.add(std::move(op));
}

}  // namespace

void register_mx_ops(OpRegistry& r) {
  add_quantize(r);
  add_dequantize(r);
}

}  // namespace tensord
