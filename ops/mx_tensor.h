// MX tensors (API.md 7) as one value: a Tensor whose TensorMeta carries an
// MxMeta. Its storage holds the packed element codes (ops/kernels/mx.h's bit
// order) followed directly by the e8m0 block scales, so an MX tensor is one
// allocation of its packed size: stores, memory accounts, device copies and
// checkpoints move it like any tensor. TensorMeta::shape is the logical
// shape; dtype is uint8 (the bytes), and only ops that say so (OpDef::
// takes_mx) accept an MX operand. docs/api-notes.md, "MX", has the layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/attr.h"
#include "ops/error.h"
#include "ops/kernels/mx.h"
#include "ops/tensor.h"

namespace tensord {

// Largest block size accepted (OCP MX v1.0 defines 32; larger blocks only
// cost precision, but a bound keeps the per-block loops' counts sane).
inline constexpr int64_t kMxMaxBlockSize = int64_t{1} << 20;

struct MxMeta {
  kernels::MxFormat format = kernels::MxFormat::kFp8E4M3;
  int64_t block_size = 32;
  int64_t axis = -1;  // as given, in [-dim, dim)
  Shape shape;        // logical
  // Derived (make_mx_meta):
  int64_t dim_axis = 0;  // axis in [0, dim)
  Shape elements_shape;  // uint8: the axis packed to len * bits / 8 bytes
  Shape scale_shape;     // float8_e8m0fnu: the axis divided by block_size
  size_t element_bytes = 0;
  size_t scale_bytes = 0;
  size_t nbytes() const { return element_bytes + scale_bytes; }
};

// "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1".
std::string_view mx_format_name(kernels::MxFormat f);
std::optional<kernels::MxFormat> mx_format_from_name(std::string_view name);
// The five names, comma-separated, for error messages.
std::string mx_format_names();

// Checks and completes an MX description: block_size positive, at most
// kMxMaxBlockSize and whole bytes per block; axis within the shape (which has
// at least one dimension); the axis length a multiple of block_size. A
// violation throws Error: from an op (from_wire false) invalid_argument, or
// shape_mismatch for the axis length (422); from a wire format bad_request
// (400). `what` starts the message.
std::shared_ptr<const MxMeta> make_mx_meta(kernels::MxFormat f, int64_t block_size, int64_t axis, Shape shape,
                                           bool from_wire, const std::string& what);

// mx.quantize's call (input, format, block_size, axis, scale_rounding) as
// checked by every backend's kernel: the scale rounding and the result's
// description. Throws invalid_argument (unknown format or rounding, bad
// block size or axis), dtype_mismatch (an MX input, or one that is not
// float32, float16 or bfloat16), shape_mismatch (axis length).
struct MxQuantizePlan {
  kernels::MxScaleRounding rounding = kernels::MxScaleRounding::kFloor;
  std::shared_ptr<const MxMeta> mx;
};
MxQuantizePlan mx_quantize_plan(const TensorMeta& x, const std::vector<Attr>& attrs);

// The TensorMeta of an MX tensor described by `m`.
TensorMeta mx_tensor_meta(std::shared_ptr<const MxMeta> m);
// "mxfp4_e2m1[4, 64] (block_size 32, axis -1)".
std::string mx_meta_str(const MxMeta& m);

// Views of an MX tensor's two parts (same storage, no copy).
Tensor mx_elements(const Tensor& q);
Tensor mx_scale(const Tensor& q);

// An uninitialised host MX tensor.
Tensor mx_empty_host(std::shared_ptr<const MxMeta> m);
// An MX tensor over `bytes` of `storage` at `offset` (a kernel's output).
Tensor mx_over(std::shared_ptr<const MxMeta> m, std::shared_ptr<Storage> storage, size_t offset = 0);

// A host MX tensor from its two parts (host tensors), copied into one
// allocation. The parts must be uint8 of m's elements_shape and
// float8_e8m0fnu of its scale_shape; otherwise Error(code) naming `what`.
Tensor mx_from_parts(std::shared_ptr<const MxMeta> m, const Tensor& elements, const Tensor& scale, ErrorCode code,
                     const std::string& what);

}  // namespace tensord
