#include "ops/mx_tensor.h"

#include <cstring>

namespace tensord {
namespace {

using kernels::MxFormat;

struct NamedFormat {
  const char* name;
  MxFormat format;
};
constexpr NamedFormat kFormats[] = {{"mxfp8_e4m3", MxFormat::kFp8E4M3},
                                    {"mxfp8_e5m2", MxFormat::kFp8E5M2},
                                    {"mxfp6_e2m3", MxFormat::kFp6E2M3},
                                    {"mxfp6_e3m2", MxFormat::kFp6E3M2},
                                    {"mxfp4_e2m1", MxFormat::kFp4E2M1}};

MxFormat format_of(const Attr& a, const std::string& op) {
  const std::string& s = a.to_string((op + ": format").c_str());
  if (auto f = mx_format_from_name(s)) return *f;
  throw Error(ErrorCode::kInvalidArgument,
              op + ": unknown MX format '" + s + "'; expected one of " + mx_format_names());
}

kernels::MxScaleRounding rounding_of(const Attr& a, const std::string& op) {
  const std::string& s = a.to_string((op + ": scale_rounding").c_str());
  if (s == "floor") return kernels::MxScaleRounding::kFloor;
  if (s == "rceil") return kernels::MxScaleRounding::kRceil;
  throw Error(ErrorCode::kInvalidArgument, op + ": unknown scale_rounding '" + s + "'; expected one of floor, rceil");
}

}  // namespace

MxQuantizePlan mx_quantize_plan(const TensorMeta& x, const std::vector<Attr>& attrs) {
  const std::string op = "mx.quantize";
  MxQuantizePlan p{};
  const MxFormat format = format_of(attrs[1], op);
  const int64_t bs = attrs[2].to_int("mx.quantize: block_size");
  const int64_t axis = attrs[3].to_int("mx.quantize: axis");
  p.rounding = rounding_of(attrs[4], op);
  if (x.mx) {
    throw Error(ErrorCode::kDtypeMismatch, op + ": the input is an MX tensor already (" + x.str() + ")");
  }
  if (x.dtype != DType::kFloat32 && x.dtype != DType::kFloat16 && x.dtype != DType::kBFloat16) {
    throw Error(ErrorCode::kDtypeMismatch,
                op + ": expected a float32, float16 or bfloat16 input, got " + std::string(dtype_name(x.dtype)));
  }
  p.mx = make_mx_meta(format, bs, axis, x.shape, /*from_wire=*/false, op);
  return p;
}

std::string_view mx_format_name(MxFormat f) {
  for (const auto& nf : kFormats) {
    if (nf.format == f) return nf.name;
  }
  return "mx?";
}

std::optional<MxFormat> mx_format_from_name(std::string_view name) {
  for (const auto& nf : kFormats) {
    if (name == nf.name) return nf.format;
  }
  return std::nullopt;
}

std::string mx_format_names() {
  std::string out;
  for (const auto& nf : kFormats) out += std::string(out.empty() ? "" : ", ") + nf.name;
  return out;
}

std::shared_ptr<const MxMeta> make_mx_meta(MxFormat f, int64_t block_size, int64_t axis, Shape shape, bool from_wire,
                                           const std::string& what) {
  auto fail = [&](ErrorCode natural, const std::string& why) {
    throw Error(from_wire ? ErrorCode::kBadRequest : natural, what + ": " + why);
  };
  const kernels::MxElemSpec s = kernels::mx_spec(f);
  if (block_size < 1 || block_size > kMxMaxBlockSize || block_size % s.group_elems != 0) {
    fail(ErrorCode::kInvalidArgument, "block_size must be a positive multiple of " + std::to_string(s.group_elems) +
                                          " up to " + std::to_string(kMxMaxBlockSize) + " for " +
                                          std::string(mx_format_name(f)) + " (whole bytes per block), got " +
                                          std::to_string(block_size));
  }
  const auto rank = static_cast<int64_t>(shape.size());
  if (rank == 0) fail(ErrorCode::kInvalidArgument, "a 0-d shape has no axis to block along");
  if (axis < -rank || axis >= rank) {
    fail(ErrorCode::kInvalidArgument, "axis " + std::to_string(axis) + " is out of range for shape " +
                                          shape_str(shape) + " (expected [" + std::to_string(-rank) + ", " +
                                          std::to_string(rank - 1) + "])");
  }
  for (int64_t d : shape) {
    if (d < 0) fail(ErrorCode::kInvalidArgument, "negative dimension in shape " + shape_str(shape));
  }
  try {
    shape_numel(shape);
  } catch (const Error& e) {
    fail(ErrorCode::kInvalidArgument, e.message());
  }
  auto m = std::make_shared<MxMeta>();
  m->format = f;
  m->block_size = block_size;
  m->axis = axis;
  m->dim_axis = axis < 0 ? axis + rank : axis;
  const auto ax = static_cast<size_t>(m->dim_axis);
  const int64_t len = shape[ax];
  if (len % block_size != 0) {
    fail(ErrorCode::kShapeMismatch, "the length of axis " + std::to_string(m->dim_axis) + " (" + std::to_string(len) +
                                        ", shape " + shape_str(shape) + ") must be a multiple of block_size " +
                                        std::to_string(block_size));
  }
  m->shape = std::move(shape);
  m->elements_shape = m->shape;
  m->elements_shape[ax] = len / s.group_elems * s.group_bytes;
  m->scale_shape = m->shape;
  m->scale_shape[ax] = len / block_size;
  m->element_bytes = static_cast<size_t>(shape_numel(m->elements_shape));
  m->scale_bytes = static_cast<size_t>(shape_numel(m->scale_shape));
  return m;
}

TensorMeta mx_tensor_meta(std::shared_ptr<const MxMeta> m) {
  TensorMeta t{DType::kUInt8, m->shape};
  t.mx = std::move(m);
  return t;
}

std::string mx_meta_str(const MxMeta& m) {
  return std::string(mx_format_name(m.format)) + shape_str(m.shape) + " (block_size " + std::to_string(m.block_size) +
         ", axis " + std::to_string(m.axis) + ")";
}

Tensor mx_elements(const Tensor& q) {
  TENSORD_ASSERT(q.meta().mx != nullptr);
  return Tensor(TensorMeta{DType::kUInt8, q.meta().mx->elements_shape}, q.storage(), q.byte_offset());
}

Tensor mx_scale(const Tensor& q) {
  const MxMeta* m = q.meta().mx.get();
  TENSORD_ASSERT(m != nullptr);
  return Tensor(TensorMeta{DType::kFloat8E8M0FNU, m->scale_shape}, q.storage(), q.byte_offset() + m->element_bytes);
}

Tensor mx_empty_host(std::shared_ptr<const MxMeta> m) {
  const size_t bytes = m->nbytes();
  return Tensor(mx_tensor_meta(std::move(m)), Storage::host(bytes));
}

Tensor mx_over(std::shared_ptr<const MxMeta> m, std::shared_ptr<Storage> storage, size_t offset) {
  return Tensor(mx_tensor_meta(std::move(m)), std::move(storage), offset);
}

Tensor mx_from_parts(std::shared_ptr<const MxMeta> m, const Tensor& elements, const Tensor& scale, ErrorCode code,
                     const std::string& what) {
  auto check = [&](const Tensor& t, DType dt, const Shape& want, const char* part) {
    if (t.meta().mx || t.dtype() != dt || t.shape() != want) {
      throw Error(code, what + ": " + part + " must be " + std::string(dtype_name(dt)) + shape_str(want) + " for " +
                            mx_meta_str(*m) + ", got " + t.meta().str());
    }
  };
  check(elements, DType::kUInt8, m->elements_shape, "the packed elements");
  check(scale, DType::kFloat8E8M0FNU, m->scale_shape, "the scale");
  TENSORD_ASSERT(elements.on_host() && scale.on_host());
  Tensor q = mx_empty_host(m);
  if (m->element_bytes) std::memcpy(q.data(), elements.data(), m->element_bytes);
  if (m->scale_bytes) std::memcpy(static_cast<char*>(q.data()) + m->element_bytes, scale.data(), m->scale_bytes);
  return q;
}

}  // namespace tensord
