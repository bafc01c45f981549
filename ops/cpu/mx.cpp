// Microscaling ops (API.md 7): mx.quantize and mx.dequantize.
// In the engine an MX value is two tensors (docs/api-notes.md, "MX"):
//  - elements: uint8, the logical shape with the block axis packed
//    (len * bits / 8 bytes per fiber along the axis, ops/kernels/mx.h's bit
//    order),
//  - scale: float8_e8m0fnu, the logical shape with the axis divided by the
//    block size,
// plus the format and axis as attrs; the logical shape and block size follow
// from the two shapes. Loops: ops/cpu/mx_loop.cpp.
#include <string>

#include "ops/cpu/mx_loop.h"
#include "ops/cpu/register.h"
#include "ops/error.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

using kernels::MxFormat;
using kernels::MxScaleRounding;

struct NamedFormat {
  const char* name;
  MxFormat format;
};
constexpr NamedFormat kFormats[] = {{"mxfp8_e4m3", MxFormat::kFp8E4M3},
                                    {"mxfp8_e5m2", MxFormat::kFp8E5M2},
                                    {"mxfp6_e2m3", MxFormat::kFp6E2M3},
                                    {"mxfp6_e3m2", MxFormat::kFp6E3M2},
                                    {"mxfp4_e2m1", MxFormat::kFp4E2M1}};

// Largest block size accepted (OCP MX v1.0 defines 32; larger blocks only
// cost precision, but a bound keeps the per-block loops' counts sane).
constexpr int64_t kMaxBlockSize = int64_t{1} << 20;

MxFormat format_of(const Attr& a, const std::string& op) {
  const std::string& s = a.to_string((op + ": format").c_str());
  for (const auto& f : kFormats) {
    if (s == f.name) return f.format;
  }
  std::string valid;
  for (const auto& f : kFormats) valid += std::string(valid.empty() ? "" : ", ") + f.name;
  throw Error(ErrorCode::kInvalidArgument, op + ": unknown MX format '" + s + "'; expected one of " + valid);
}

MxScaleRounding rounding_of(const Attr& a, const std::string& op) {
  const std::string& s = a.to_string((op + ": scale_rounding").c_str());
  if (s == "floor") return MxScaleRounding::kFloor;
  if (s == "rceil") return MxScaleRounding::kRceil;
  throw Error(ErrorCode::kInvalidArgument, op + ": unknown scale_rounding '" + s + "'; expected one of floor, rceil");
}

void check_block_size(int64_t bs, MxFormat f, const std::string& op) {
  const kernels::MxElemSpec s = kernels::mx_spec(f);
  if (bs < 1 || bs > kMaxBlockSize || bs % s.group_elems != 0) {
    throw Error(ErrorCode::kInvalidArgument, op + ": block_size must be a positive multiple of " +
                                                 std::to_string(s.group_elems) + " up to " +
                                                 std::to_string(kMaxBlockSize) +
                                                 " for this format (whole bytes per block), got " + std::to_string(bs));
  }
}

MxLayout layout_of(const Shape& shape, int64_t axis, int64_t len, int64_t block) {
  MxLayout l;
  for (int64_t d = 0; d < axis; ++d) l.outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) l.inner *= shape[d];
  l.len = len;
  l.block = block;
  return l;
}

// ---- mx.quantize ----

struct QuantizePlan {
  MxFormat format;
  MxScaleRounding rounding;
  MxLayout layout;
  TensorMeta elements, scale;
};

QuantizePlan plan_quantize(const TensorMeta& x, const OpArgs<TensorMeta>& a) {
  const std::string op = "mx.quantize";
  QuantizePlan p{};
  p.format = format_of(a.attr(1), op);
  const int64_t bs = a.attr(2).to_int("mx.quantize: block_size");
  check_block_size(bs, p.format, op);
  p.rounding = rounding_of(a.attr(4), op);
  if (x.dtype != DType::kFloat32 && x.dtype != DType::kFloat16 && x.dtype != DType::kBFloat16) {
    throw Error(ErrorCode::kDtypeMismatch,
                op + ": expected a float32, float16 or bfloat16 input, got " + std::string(dtype_name(x.dtype)));
  }
  if (x.dim() == 0) throw Error(ErrorCode::kInvalidArgument, op + ": a 0-d input has no axis to block along");
  const int64_t axis = wrap_dim(a.attr(3).to_int("mx.quantize: axis"), x.dim(), "mx.quantize");
  const int64_t len = x.shape[static_cast<size_t>(axis)];
  if (len % bs != 0) {
    throw Error(ErrorCode::kShapeMismatch, op + ": the length of axis " + std::to_string(axis) + " (" +
                                               std::to_string(len) + ", shape " + shape_str(x.shape) +
                                               ") must be a multiple of block_size " + std::to_string(bs));
  }
  const kernels::MxElemSpec s = kernels::mx_spec(p.format);
  p.layout = layout_of(x.shape, axis, len, bs);
  p.elements = TensorMeta{DType::kUInt8, x.shape};
  p.elements.shape[static_cast<size_t>(axis)] = len / s.group_elems * s.group_bytes;
  p.scale = TensorMeta{DType::kFloat8E8M0FNU, x.shape};
  p.scale.shape[static_cast<size_t>(axis)] = len / bs;
  return p;
}

OpArgs<TensorMeta> metas(const OpArgs<Tensor>& a) {
  OpArgs<TensorMeta> m;
  m.op = a.op;
  m.node = a.node;
  m.attrs = a.attrs;
  m.tensors.resize(a.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    for (const auto& t : a.tensors[i]) m.tensors[i].push_back(t.meta());
  }
  return m;
}

void add_quantize(OpRegistry& r) {
  OpDef op;
  op.name = "mx.quantize";
  op.doc = "OCP MX v1.0 block quantization: packed uint8 elements and one float8_e8m0fnu scale per block along axis.";
  op.params = {ParamSpec{"input", ParamKind::kTensor, Attr(), false, false},
               ParamSpec{"format", ParamKind::kString, Attr(), false, false},
               ParamSpec{"block_size", ParamKind::kInt, Attr(32), false, false},
               ParamSpec{"axis", ParamKind::kInt, Attr(-1), false, false},
               ParamSpec{"scale_rounding", ParamKind::kString, Attr("floor"), false, false}};
  op.outputs = {"elements", "scale"};
  op.dtypes = {DType::kFloat16, DType::kBFloat16, DType::kFloat32};
  op.dtype_note = "-> uint8 elements, float8_e8m0fnu scale";
  op.infer = [](const OpArgs<TensorMeta>& a) {
    QuantizePlan p = plan_quantize(a.tensor(0), a);
    return std::vector<TensorMeta>{p.elements, p.scale};
  };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    QuantizePlan p = plan_quantize(x.meta(), metas(a));
    Tensor elements = ctx.empty(p.elements.dtype, p.elements.shape);
    Tensor scale = ctx.empty(p.scale.dtype, p.scale.shape);
    mx_quantize_cpu(ctx, x, p.format, p.rounding, p.layout, elements, scale);
    return std::vector<Tensor>{elements, scale};
  };
  r.add(std::move(op));
}

// ---- mx.dequantize ----

struct DequantizePlan {
  MxFormat format;
  MxLayout layout;
  TensorMeta out;
};

DequantizePlan plan_dequantize(const TensorMeta& q, const TensorMeta& sc, const OpArgs<TensorMeta>& a) {
  const std::string op = "mx.dequantize";
  DequantizePlan p{};
  p.format = format_of(a.attr(2), op);
  const kernels::MxElemSpec s = kernels::mx_spec(p.format);
  if (q.dtype != DType::kUInt8) {
    throw Error(ErrorCode::kDtypeMismatch,
                op + ": elements must be uint8 (packed codes), got " + std::string(dtype_name(q.dtype)));
  }
  if (sc.dtype != DType::kFloat8E8M0FNU) {
    throw Error(ErrorCode::kDtypeMismatch,
                op + ": scale must be float8_e8m0fnu, got " + std::string(dtype_name(sc.dtype)));
  }
  if (q.dim() == 0) throw Error(ErrorCode::kInvalidArgument, op + ": 0-d elements have no block axis");
  const int64_t axis = wrap_dim(a.attr(3).to_int("mx.dequantize: axis"), q.dim(), "mx.dequantize");
  const auto ax = static_cast<size_t>(axis);
  bool same_rest = q.shape.size() == sc.shape.size();
  for (size_t d = 0; same_rest && d < q.shape.size(); ++d) same_rest = d == ax || q.shape[d] == sc.shape[d];
  const int64_t lenp = q.shape[ax];
  const int64_t nb = same_rest ? sc.shape[ax] : 0;
  if (!same_rest || lenp % s.group_bytes != 0) {
    throw Error(ErrorCode::kShapeMismatch, op + ": elements " + shape_str(q.shape) + " and scale " +
                                               shape_str(sc.shape) + " do not describe one " +
                                               std::string(a.attr(2).to_string("format")) + " tensor along axis " +
                                               std::to_string(axis));
  }
  const int64_t len = lenp / s.group_bytes * s.group_elems;
  int64_t bs = 0;
  if (nb > 0 && len % nb == 0) bs = len / nb;
  if (nb == 0 && len == 0) bs = a.attr(4).is_none() ? 32 : a.attr(4).to_int("mx.dequantize: block_size");
  if (bs == 0 || (!a.attr(4).is_none() && a.attr(4).to_int("mx.dequantize: block_size") != bs)) {
    throw Error(ErrorCode::kShapeMismatch,
                op + ": " + std::to_string(len) + " elements along axis " + std::to_string(axis) +
                    " do not split into " + std::to_string(nb) + " blocks" +
                    (a.attr(4).is_none() ? std::string() : " of block_size " + a.attr(4).repr()));
  }
  check_block_size(bs, p.format, op);
  p.out = TensorMeta{DType::kFloat32, q.shape};
  p.out.shape[ax] = len;
  shape_numel(p.out.shape);
  p.layout = layout_of(p.out.shape, axis, len, bs);
  return p;
}

void add_dequantize(OpRegistry& r) {
  OpDef op;
  op.name = "mx.dequantize";
  op.doc = "Float32 values of an MX tensor given as mx.quantize's packed elements and e8m0 scales.";
  op.params = {ParamSpec{"elements", ParamKind::kTensor, Attr(), false, false},
               ParamSpec{"scale", ParamKind::kTensor, Attr(), false, false},
               ParamSpec{"format", ParamKind::kString, Attr(), false, false},
               ParamSpec{"axis", ParamKind::kInt, Attr(-1), false, true},
               ParamSpec{"block_size", ParamKind::kInt, Attr(), true, true}};
  op.outputs = {"out"};
  op.dtypes = {DType::kUInt8};
  op.dtype_note = "elements uint8, scale float8_e8m0fnu; -> float32";
  op.infer = [](const OpArgs<TensorMeta>& a) {
    return std::vector<TensorMeta>{plan_dequantize(a.tensor(0), a.tensor(1), a).out};
  };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& q = a.tensor(0);
    const Tensor& sc = a.tensor(1);
    DequantizePlan p = plan_dequantize(q.meta(), sc.meta(), metas(a));
    Tensor out = ctx.empty(DType::kFloat32, p.out.shape);
    mx_dequantize_cpu(ctx, q, sc, p.format, p.layout, out);
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
