// mx.quantize and mx.dequantize on the CUDA backend (API.md 7), with the
// element and scale arithmetic of ops/kernels/mx.h (host-device inline), so
// the bytes are those of the CPU loops (ops/cpu/mx_loop.cpp). Quantize: one
// thread per block (its amax, its e8m0 code, then its packed groups);
// dequantize: one thread per packed group. Along a non-contiguous block
// axis, neighbouring threads take neighbouring inner columns, so loads and
// stores coalesce. mx.h's rounding needs IEEE float32 (no flush to zero, no
// fast math) and an IEEE division for rceil: nvcc's defaults.
#include <cstdint>
#include <vector>

#include "ops/cuda/cuda_check.h"
#include "ops/cpu/mx_loop.h"  // MxLayout, mx_layout_of: the CPU loops' view of the same layout
#include "ops/cuda/cuda_ops.h"
#include "ops/error.h"
#include "ops/kernels/mx.h"
#include "ops/mx_tensor.h"

namespace tensord::cuda {
namespace {

using kernels::MxElemSpec;
using kernels::MxFormat;
using kernels::MxScaleRounding;

constexpr int kThreads = 256;

// [outer, len, inner] around the block axis; blocks of `block` along len.
unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

enum InputKind : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

template <int In>
__device__ __forceinline__ float load_in(const void* p, int64_t i) {
  if constexpr (In == kF32) {
    return static_cast<const float*>(p)[i];
  } else if constexpr (In == kF16) {
    return kernels::f16_to_f32(static_cast<const uint16_t*>(p)[i]);
  } else {
    return kernels::bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
  }
}

template <int In, MxFormat F>
__global__ void quantize_kernel(const void* x, MxLayout l, MxScaleRounding r, uint8_t* q, uint8_t* sc, int64_t total) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  const int64_t nb = l.len / l.block;
  const int64_t groups = l.block / s.group_elems;
  const int64_t lenp = l.len / s.group_elems * s.group_bytes;
  const int64_t xs = l.inner;
  for (int64_t id = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; id < total;
       id += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = id % l.inner;
    const int64_t j = (id / l.inner) % nb;
    const int64_t o = id / (l.inner * nb);
    const int64_t x0 = (o * l.len + j * l.block) * l.inner + c;
    uint32_t amax = 0;
    for (int64_t i = 0; i < l.block; ++i) {
      const uint32_t b = kernels::f32_bits(load_in<In>(x, x0 + i * xs)) & 0x7fffffffu;
      amax = b > amax ? b : amax;
    }
    const uint8_t code = kernels::mx_scale(amax, s, r);
    sc[(o * nb + j) * l.inner + c] = code;
    const bool nan = code == kernels::kE8M0Nan;
    const float inv = kernels::mx_inv_scale(nan ? 127 : code);
    uint8_t* qb = q + (o * lenp + j * groups * s.group_bytes) * l.inner + c;
    for (int64_t g = 0; g < groups; ++g) {
      uint32_t codes[4] = {0u, 0u, 0u, 0u};
      for (int k = 0; k < s.group_elems; ++k) {
        codes[k] = nan ? 0u : kernels::mx_encode(load_in<In>(x, x0 + (g * s.group_elems + k) * xs), inv, s);
      }
      kernels::mx_pack_group(codes, s, qb + g * s.group_bytes * xs, xs);
    }
  }
}

template <MxFormat F>
__global__ void dequantize_kernel(const uint8_t* q, const uint8_t* sc, MxLayout l, float* out, int64_t total) {
  constexpr MxElemSpec s = kernels::mx_spec(F);
  const int64_t ng = l.len / s.group_elems;
  const int64_t nb = l.len / l.block;
  for (int64_t id = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; id < total;
       id += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = id % l.inner;
    const int64_t g = (id / l.inner) % ng;
    const int64_t o = id / (l.inner * ng);
    uint32_t codes[4];
    kernels::mx_unpack_group(q + (o * ng + g) * s.group_bytes * l.inner + c, l.inner, s, codes);
    const int64_t p0 = g * s.group_elems;  // a group never straddles two blocks
    const uint8_t scale = sc[(o * nb + p0 / l.block) * l.inner + c];
    for (int k = 0; k < s.group_elems; ++k) {
      out[(o * l.len + p0 + k) * l.inner + c] = kernels::mx_dequantize_one(codes[k], scale, s);
    }
  }
}

template <class Fn>
void with_format(MxFormat f, Fn&& fn) {
  switch (f) {
    case MxFormat::kFp8E4M3:
      return fn.template operator()<MxFormat::kFp8E4M3>();
    case MxFormat::kFp8E5M2:
      return fn.template operator()<MxFormat::kFp8E5M2>();
    case MxFormat::kFp6E2M3:
      return fn.template operator()<MxFormat::kFp6E2M3>();
    case MxFormat::kFp6E3M2:
      return fn.template operator()<MxFormat::kFp6E3M2>();
    case MxFormat::kFp4E2M1:
      return fn.template operator()<MxFormat::kFp4E2M1>();
  }
}

template <int In>
void launch_quantize(const OpContext& ctx, const void* x, MxFormat f, MxScaleRounding r, const MxLayout& l, uint8_t* q,
                     uint8_t* sc) {
  const int64_t total = l.outer * (l.len / l.block) * l.inner;
  with_format(f, [&]<MxFormat F>() {
    quantize_kernel<In, F><<<blocks_for(total), kThreads, 0, raw_stream(ctx)>>>(x, l, r, q, sc, total);
  });
}

bool is_mx_input(const TensorMeta& m) {
  return (m.dtype == DType::kFloat32 || m.dtype == DType::kFloat16 || m.dtype == DType::kBFloat16) && !m.mx &&
         !m.wrapped_number;
}

void add_quantize(OpRegistry& r) {
  OpDef* d = r.find_mutable("mx.quantize");
  TENSORD_ASSERT(d != nullptr);
  d->accepts["cuda"] = [](const OpArgs<TensorMeta>& a) { return is_mx_input(a.tensor(0)); };
  d->capture_safe.insert("cuda");
  d->kernels["cuda"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    const MxQuantizePlan p = mx_quantize_plan(x.meta(), a.attrs);
    Tensor bytes = ctx.empty(DType::kUInt8, {static_cast<int64_t>(p.mx->nbytes())});
    Tensor out = mx_over(p.mx, bytes.storage(), bytes.byte_offset());
    if (x.numel() == 0) return std::vector<Tensor>{out};
    auto* base = static_cast<uint8_t*>(out.data());
    uint8_t* q = base;
    uint8_t* sc = base + p.mx->element_bytes;
    const MxLayout l = mx_layout_of(*p.mx);
    switch (x.dtype()) {
      case DType::kFloat32:
        launch_quantize<kF32>(ctx, x.data(), p.mx->format, p.rounding, l, q, sc);
        break;
      case DType::kFloat16:
        launch_quantize<kF16>(ctx, x.data(), p.mx->format, p.rounding, l, q, sc);
        break;
      default:
        launch_quantize<kBF16>(ctx, x.data(), p.mx->format, p.rounding, l, q, sc);
        break;
    }
    TENSORD_CUDA_CHECK(cudaGetLastError());
    return std::vector<Tensor>{out};
  };
}

void add_dequantize(OpRegistry& r) {
  OpDef* d = r.find_mutable("mx.dequantize");
  TENSORD_ASSERT(d != nullptr);
  d->accepts["cuda"] = [](const OpArgs<TensorMeta>& a) { return a.tensor(0).mx != nullptr; };
  d->capture_safe.insert("cuda");
  d->kernels["cuda"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& q = a.tensor(0);
    if (!q.is_mx()) {
      throw Error(ErrorCode::kDtypeMismatch, "mx.dequantize: expected an MX tensor, got " + q.meta().str());
    }
    const MxMeta& m = *q.meta().mx;
    Tensor out = ctx.empty(DType::kFloat32, m.shape);
    if (out.numel() == 0) return std::vector<Tensor>{out};
    const auto* base = static_cast<const uint8_t*>(q.data());
    const MxLayout l = mx_layout_of(m);
    with_format(m.format, [&]<MxFormat F>() {
      constexpr MxElemSpec s = kernels::mx_spec(F);
      const int64_t total = l.outer * (l.len / s.group_elems) * l.inner;
      dequantize_kernel<F><<<blocks_for(total), kThreads, 0, raw_stream(ctx)>>>(base, base + m.element_bytes, l,
                                                                                out.data_ptr<float>(), total);
    });
    TENSORD_CUDA_CHECK(cudaGetLastError());
    return std::vector<Tensor>{out};
  };
}

}  // namespace

void register_mx_kernels(OpRegistry& r) {
  add_quantize(r);
  add_dequantize(r);
}

}  // namespace tensord::cuda
