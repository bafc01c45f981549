// float32 elementwise kernels on CUDA over the functors of
// ops/kernels/elementwise.h, the code the CPU loops run. One grid-stride
// kernel per (functor, arity); operands are float32 device tensors
// broadcast to the result's shape (contiguous when they have its shape, a
// stride table otherwise) or wrapped Python numbers passed by value, cast to
// float32 as the CPU kernels cast them. Other dtypes run on the CPU.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/error.h"
#include "ops/kernels/elementwise.h"
#include "ops/shape.h"

namespace tensord::cuda {
namespace {

constexpr int kMaxDims = 8;
constexpr int kThreads = 256;

struct Geometry {
  int ndim = 1;
  int64_t size[kMaxDims] = {};
  int64_t n = 0;
};

// How one operand maps onto the result's elements.
struct Operand {
  const float* p = nullptr;
  float scalar = 0;
  bool is_scalar = false;  // a wrapped number (launch argument)
  bool flat = false;       // the result's shape, contiguous
  int64_t stride[kMaxDims] = {};
};

__device__ __forceinline__ float load(const Operand& o, const Geometry& g, int64_t i) {
  if (o.is_scalar) return o.scalar;
  if (o.flat) return o.p[i];
  int64_t off = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t c = i % g.size[d];
    i /= g.size[d];
    off += c * o.stride[d];
  }
  return o.p[off];
}

template <class F, class Out>
__global__ void binary_kernel(F f, Operand a, Operand b, Geometry g, Out* out) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < g.n; i += step) {
    out[i] = static_cast<Out>(f(load(a, g, i), load(b, g, i)));
  }
}

template <class F, class Out>
__global__ void unary_kernel(F f, Operand a, Geometry g, Out* out) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < g.n; i += step) {
    out[i] = static_cast<Out>(f(load(a, g, i)));
  }
}

Geometry geometry_of(const Shape& out) {
  if (out.size() > static_cast<size_t>(kMaxDims)) {
    throw Error(ErrorCode::kUnsupported, "cuda elementwise: more than 8 dims");
  }
  Geometry g;
  g.n = shape_numel(out);
  g.ndim = out.empty() ? 1 : static_cast<int>(out.size());
  for (int d = 0; d < g.ndim; ++d) g.size[d] = out.empty() ? 1 : out[static_cast<size_t>(d)];
  return g;
}

float number_value(const Tensor& t) {
  switch (t.dtype()) {
    case DType::kFloat64:
      return static_cast<float>(*t.data_ptr<double>());
    case DType::kFloat32:
      return *t.data_ptr<float>();
    case DType::kInt64:
      return static_cast<float>(*t.data_ptr<int64_t>());
    case DType::kBool:
      return *t.data_ptr<bool>() ? 1.f : 0.f;
    default:
      throw Error(ErrorCode::kInternal,
                  "cuda elementwise: a wrapped number of dtype " + std::string(dtype_name(t.dtype())));
  }
}

Operand operand_of(const Tensor& t, const Shape& out, const Geometry& g) {
  Operand o;
  if (t.meta().wrapped_number && t.on_host()) {
    o.is_scalar = true;
    o.scalar = number_value(t);
    return o;
  }
  if (t.device().type != DeviceType::kCUDA || t.dtype() != DType::kFloat32) {
    throw Error(ErrorCode::kInternal,
                "cuda elementwise: operand " + t.meta().str() + " is not a float32 device tensor");
  }
  o.p = t.data_ptr<float>();
  if (t.shape() == out) {
    o.flat = true;
    return o;
  }
  // Right-aligned broadcast: a missing or size-1 dim has stride 0.
  const Shape& s = t.shape();
  int64_t stride = 1;
  for (int d = g.ndim - 1, k = static_cast<int>(s.size()) - 1; d >= 0; --d, --k) {
    const int64_t size = k >= 0 ? s[static_cast<size_t>(k)] : 1;
    o.stride[d] = size == 1 ? 0 : stride;
    stride *= size;
  }
  return o;
}

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

bool is_float32(const TensorMeta& m) {
  return m.dtype == DType::kFloat32 && !m.wrapped_number;
}
bool is_number(const TensorMeta& m) {
  return m.wrapped_number && m.dim() == 0;
}

template <template <class> class Op, class Out>
void add_binary(OpRegistry& r, const char* name, bool with_alpha = false) {
  OpDef* d = r.find_mutable(name);
  TENSORD_ASSERT(d != nullptr);
  d->accepts["cuda"] = [name](const OpArgs<TensorMeta>& a) {
    const TensorMeta& y = a.tensor(1);
    if (!is_float32(a.tensor(0)) || !(is_float32(y) || is_number(y))) return false;
    if (a.tensor(0).dim() > kMaxDims || y.dim() > kMaxDims) return false;
    return std::string_view(name) != "div" || a.attr(2).is_none();  // true division only
  };
  d->capture_safe.insert("cuda");
  d->kernels["cuda"] = [name, with_alpha](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    const Tensor& y = a.tensor(1);
    const Shape out_shape = broadcast_shapes(x.shape(), y.shape(), name);
    Tensor out = ctx.empty(std::is_same_v<Out, bool> ? DType::kBool : DType::kFloat32, out_shape);
    const Geometry g = geometry_of(out_shape);
    if (g.n == 0) return std::vector<Tensor>{out};
    kernels::EwParams params;
    if (with_alpha && !a.attr(2).is_none()) params.alpha_f = a.attr(2).to_double("alpha");
    binary_kernel<<<blocks_for(g.n), kThreads, 0, raw_stream(ctx)>>>(
        Op<float>(params), operand_of(x, out_shape, g), operand_of(y, out_shape, g), g, static_cast<Out*>(out.data()));
    TENSORD_CUDA_CHECK(cudaGetLastError());
    return std::vector<Tensor>{out};
  };
}

template <template <class> class Op>
void add_unary(OpRegistry& r, const char* name) {
  OpDef* d = r.find_mutable(name);
  TENSORD_ASSERT(d != nullptr);
  d->accepts["cuda"] = [](const OpArgs<TensorMeta>& a) {
    return is_float32(a.tensor(0)) && a.tensor(0).dim() <= kMaxDims;
  };
  d->capture_safe.insert("cuda");
  d->kernels["cuda"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    Tensor out = ctx.empty(DType::kFloat32, x.shape());
    const Geometry g = geometry_of(x.shape());
    if (g.n == 0) return std::vector<Tensor>{out};
    unary_kernel<<<blocks_for(g.n), kThreads, 0, raw_stream(ctx)>>>(Op<float>{}, operand_of(x, x.shape(), g), g,
                                                                    out.data_ptr<float>());
    TENSORD_CUDA_CHECK(cudaGetLastError());
    return std::vector<Tensor>{out};
  };
}

}  // namespace

void register_elementwise_kernels(OpRegistry& r) {
  using namespace kernels;
  add_binary<AddOp, float>(r, "add", true);
  add_binary<SubOp, float>(r, "sub", true);
  add_binary<MulOp, float>(r, "mul");
  add_binary<DivOp, float>(r, "div");
  add_binary<MaximumOp, float>(r, "maximum");
  add_binary<MinimumOp, float>(r, "minimum");
  add_binary<EqOp, bool>(r, "eq");
  add_binary<NeOp, bool>(r, "ne");
  add_binary<LtOp, bool>(r, "lt");
  add_binary<LeOp, bool>(r, "le");
  add_binary<GtOp, bool>(r, "gt");
  add_binary<GeOp, bool>(r, "ge");
  add_unary<NegOp>(r, "neg");
  add_unary<AbsOp>(r, "abs");
  add_unary<ExpOp>(r, "exp");
  add_unary<LogOp>(r, "log");
  add_unary<SqrtOp>(r, "sqrt");
  add_unary<RsqrtOp>(r, "rsqrt");
  add_unary<SigmoidOp>(r, "sigmoid");
  add_unary<TanhOp>(r, "tanh");
  add_unary<ReluOp>(r, "relu");
}

}  // namespace tensord::cuda
