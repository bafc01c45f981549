// Multi-tensor-apply launcher for the fused optimizers (optim_fused.cuh).
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/optim_fused.cuh"
#include "ops/error.h"
#include "ops/kernels/float_conv.h"

namespace tensord::cuda {
namespace {

std::atomic<int64_t> g_launches{0};

struct Chunk {
  int32_t tensor;
  int64_t begin, end;
};

// One tensor as the kernel sees it: pointers, dtype, per-step scalars for
// float and double math, and whether the state starts from nothing.
template <class Opt>
struct DevTensor {
  DType dtype;
  const void* param;
  const void* grad;
  const void* state_in[3];
  double state_init[3];  // cast to the math type where used: float64 params keep it exact
  void* param_out;
  void* state_out[3];
  bool first;  // no state yet (SGD: the buffer is the gradient)
  typename Opt::template Scalars<float> sf;
  typename Opt::template Scalars<double> sd;
};

template <class M>
__device__ __forceinline__ M load(DType d, const void* p, int64_t i) {
  switch (d) {
    case DType::kFloat32:
      return static_cast<M>(static_cast<const float*>(p)[i]);
    case DType::kFloat64:
      return static_cast<M>(static_cast<const double*>(p)[i]);
    case DType::kBFloat16:
      return static_cast<M>(kernels::bf16_to_f32(static_cast<const uint16_t*>(p)[i]));
    default:
      return static_cast<M>(kernels::f16_to_f32(static_cast<const uint16_t*>(p)[i]));
  }
}

template <class M>
__device__ __forceinline__ void store(DType d, void* p, int64_t i, M v) {
  switch (d) {
    case DType::kFloat32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    case DType::kFloat64:
      static_cast<double*>(p)[i] = static_cast<double>(v);
      break;
    case DType::kBFloat16:
      static_cast<uint16_t*>(p)[i] = kernels::f32_to_bf16(static_cast<float>(v));
      break;
    default:
      static_cast<uint16_t*>(p)[i] = kernels::f32_to_f16(static_cast<float>(v));
      break;
  }
}

template <class Opt, class M>
__device__ __forceinline__ void apply_chunk(const DevTensor<Opt>& t, const typename Opt::template Scalars<M>& s,
                                            int64_t begin, int64_t end) {
  constexpr int K = Opt::kStates;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    M p = load<M>(t.dtype, t.param, i);
    const M g = load<M>(t.dtype, t.grad, i);
    M st[3] = {M(0), M(0), M(0)};
    for (int k = 0; k < K; ++k) {
      st[k] = t.state_in[k] ? load<M>(t.dtype, t.state_in[k], i) : static_cast<M>(t.state_init[k]);
    }
    Opt::template apply<M>(p, g, st, t.first, s);
    store<M>(t.dtype, t.param_out, i, p);
    for (int k = 0; k < K; ++k) store<M>(t.dtype, t.state_out[k], i, st[k]);
  }
}

template <class Opt>
__global__ void multi_tensor_apply(const DevTensor<Opt>* tensors, const Chunk* chunks, int num_chunks) {
  for (int c = blockIdx.x; c < num_chunks; c += gridDim.x) {
    const Chunk ch = chunks[c];
    const DevTensor<Opt>& t = tensors[ch.tensor];
    if (t.dtype == DType::kFloat64) {
      apply_chunk<Opt, double>(t, t.sd, ch.begin, ch.end);
    } else {
      apply_chunk<Opt, float>(t, t.sf, ch.begin, ch.end);
    }
  }
}

// ---------------------------------------------------------------- the rules

template <bool kAdamW, bool kDecay, bool kAmsgrad>
struct AdamOpt {
  static constexpr int kStates = kAmsgrad ? 3 : 2;
  template <class M>
  using Scalars = kernels::AdamScalars<M>;
  template <class M>
  __device__ __forceinline__ static void apply(M& p, M g, M (&st)[3], bool, const Scalars<M>& s) {
    kernels::adam_update<M, kAdamW, kDecay, kAmsgrad>(p, g, st[0], st[1], st[2], s);
  }
};

template <bool kDecay, bool kMomentum, bool kNesterov>
struct SgdOpt {
  static constexpr int kStates = kMomentum ? 1 : 0;
  template <class M>
  using Scalars = kernels::SgdScalars<M>;
  template <class M>
  __device__ __forceinline__ static void apply(M& p, M g, M (&st)[3], bool first, const Scalars<M>& s) {
    if (first) {
      kernels::sgd_update<M, kDecay, kMomentum, kNesterov, true>(p, g, st[0], s);
    } else {
      kernels::sgd_update<M, kDecay, kMomentum, kNesterov, false>(p, g, st[0], s);
    }
  }
};

template <bool kDecay>
struct AdagradOpt {
  static constexpr int kStates = 1;
  template <class M>
  using Scalars = kernels::AdagradScalars<M>;
  template <class M>
  __device__ __forceinline__ static void apply(M& p, M g, M (&st)[3], bool, const Scalars<M>& s) {
    kernels::adagrad_update<M, kDecay>(p, g, st[0], s);
  }
};

// Builds the tables, copies them in one transfer and launches once.
template <class Opt, class MakeScalars>
void launch(const std::vector<OptimTensorIO>& ts, cudaStream_t stream, MakeScalars make) {
  std::vector<DevTensor<Opt>> dev(ts.size());
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < ts.size(); ++i) {
    const OptimTensorIO& io = ts[i];
    DevTensor<Opt>& d = dev[i];
    d.dtype = io.dtype;
    d.param = io.param;
    d.grad = io.grad;
    d.param_out = io.param_out;
    d.first = io.state_in[0] == nullptr;
    for (int k = 0; k < 3; ++k) {
      d.state_in[k] = io.state_in[k];
      d.state_out[k] = io.state_out[k];
      d.state_init[k] = static_cast<double>(io.state_init[k]);
    }
    make(io, d.sf, d.sd);
    for (int64_t b = 0; b < io.numel; b += kOptimChunk) {
      chunks.push_back(Chunk{static_cast<int32_t>(i), b, b + kOptimChunk < io.numel ? b + kOptimChunk : io.numel});
    }
  }
  if (chunks.empty()) return;
  const size_t tbytes = dev.size() * sizeof(DevTensor<Opt>);
  const size_t cbytes = chunks.size() * sizeof(Chunk);
  const size_t coff = (tbytes + 15) / 16 * 16;
  std::vector<char> host(coff + cbytes);
  std::memcpy(host.data(), dev.data(), tbytes);
  std::memcpy(host.data() + coff, chunks.data(), cbytes);
  void* buf = nullptr;
  TENSORD_CUDA_CHECK(cudaMallocAsync(&buf, host.size(), stream));
  TENSORD_CUDA_CHECK(cudaMemcpyAsync(buf, host.data(), host.size(), cudaMemcpyHostToDevice, stream));
  const int blocks = static_cast<int>(chunks.size() < 65535 ? chunks.size() : 65535);
  multi_tensor_apply<Opt><<<blocks, 512, 0, stream>>>(static_cast<const DevTensor<Opt>*>(buf),
                                                      reinterpret_cast<const Chunk*>(static_cast<char*>(buf) + coff),
                                                      static_cast<int>(chunks.size()));
  TENSORD_CUDA_CHECK(cudaGetLastError());
  g_launches.fetch_add(1);
  TENSORD_CUDA_CHECK(cudaFreeAsync(buf, stream));
  // The host table must outlive the copy: pageable memcpyAsync is staged
  // before it returns, so `host` may go out of scope here.
}

template <bool A, bool D, bool S>
void adam_launch(const kernels::AdamHyper& h, const std::vector<OptimTensorIO>& ts, cudaStream_t stream) {
  launch<AdamOpt<A, D, S>>(ts, stream, [&](const OptimTensorIO& io, auto& sf, auto& sd) {
    sf = kernels::adam_scalars<float>(h, io.step);
    sd = kernels::adam_scalars<double>(h, io.step);
  });
}

template <bool D, bool Mo, bool N>
void sgd_launch(const kernels::SgdHyper& h, const std::vector<OptimTensorIO>& ts, cudaStream_t stream) {
  launch<SgdOpt<D, Mo, N>>(ts, stream, [&](const OptimTensorIO&, auto& sf, auto& sd) {
    sf = kernels::sgd_scalars<float>(h);
    sd = kernels::sgd_scalars<double>(h);
  });
}

template <bool D>
void adagrad_launch(const kernels::AdagradHyper& h, const std::vector<OptimTensorIO>& ts, cudaStream_t stream) {
  launch<AdagradOpt<D>>(ts, stream, [&](const OptimTensorIO& io, auto& sf, auto& sd) {
    sf = kernels::adagrad_scalars<float>(h, io.step);
    sd = kernels::adagrad_scalars<double>(h, io.step);
  });
}

}  // namespace

void fused_adam_cuda(const kernels::AdamHyper& h, const std::vector<OptimTensorIO>& ts, cudaStream_t stream) {
  const bool d = h.weight_decay != 0;
  if (h.adamw) {
    if (d) {
      h.amsgrad ? adam_launch<true, true, true>(h, ts, stream) : adam_launch<true, true, false>(h, ts, stream);
    } else {
      h.amsgrad ? adam_launch<true, false, true>(h, ts, stream) : adam_launch<true, false, false>(h, ts, stream);
    }
  } else {
    if (d) {
      h.amsgrad ? adam_launch<false, true, true>(h, ts, stream) : adam_launch<false, true, false>(h, ts, stream);
    } else {
      h.amsgrad ? adam_launch<false, false, true>(h, ts, stream) : adam_launch<false, false, false>(h, ts, stream);
    }
  }
}

void fused_sgd_cuda(const kernels::SgdHyper& h, const std::vector<OptimTensorIO>& ts, cudaStream_t stream) {
  const bool d = h.weight_decay != 0;
  if (h.momentum == 0) {
    d ? sgd_launch<true, false, false>(h, ts, stream) : sgd_launch<false, false, false>(h, ts, stream);
  } else if (h.nesterov) {
    d ? sgd_launch<true, true, true>(h, ts, stream) : sgd_launch<false, true, true>(h, ts, stream);
  } else {
    d ? sgd_launch<true, true, false>(h, ts, stream) : sgd_launch<false, true, false>(h, ts, stream);
  }
}

void fused_adagrad_cuda(const kernels::AdagradHyper& h, const std::vector<OptimTensorIO>& ts, cudaStream_t stream) {
  h.weight_decay != 0 ? adagrad_launch<true>(h, ts, stream) : adagrad_launch<false>(h, ts, stream);
}

int64_t optim_kernel_launches() {
  return g_launches.load();
}

namespace {
void adam_pass(const OpContext& ctx, const kernels::AdamHyper& h, const std::vector<OptimTensorIO>& ts) {
  fused_adam_cuda(h, ts, raw_stream(ctx));
}
void sgd_pass(const OpContext& ctx, const kernels::SgdHyper& h, const std::vector<OptimTensorIO>& ts) {
  fused_sgd_cuda(h, ts, raw_stream(ctx));
}
void adagrad_pass(const OpContext& ctx, const kernels::AdagradHyper& h, const std::vector<OptimTensorIO>& ts) {
  fused_adagrad_cuda(h, ts, raw_stream(ctx));
}
}  // namespace

// Muon stays on the CPU kernel (its Newton-Schulz is not on the device yet).
void register_optim_kernels(OpRegistry& r) {
  static const OptimPasses passes{adam_pass, sgd_pass, adagrad_pass};
  for (const char* name : {"optim.sgd", "optim.adam", "optim.adamw", "optim.adagrad"}) {
    OpDef* d = r.find_mutable(name);
    TENSORD_ASSERT(d != nullptr);
    d->kernels["cuda"] = make_optim_kernel(name, passes);
  }
}

}  // namespace tensord::cuda
