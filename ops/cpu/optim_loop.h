// The CPU fused-optimizer loops: one vectorised pass over every tensor of a
// step, split over the context's pool. Each parameter, gradient and state
// element is read once and its new value written once, into fresh buffers
// (stored tensors are immutable values; the job commits the new ones).
// The element math is ops/kernels/optim.h, shared with ops/cuda/optim_fused.cu.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ops/dtype.h"
#include "ops/kernels/optim.h"
#include "ops/op_registry.h"

namespace tensord {

// One tensor's streams. float32/float64/bfloat16/float16; param, grad and
// state share the dtype (math in float, or double for float64).
struct OptimTensorIO {
  DType dtype = DType::kFloat32;
  int64_t numel = 0;
  const void* param = nullptr;
  const void* grad = nullptr;
  // Old state, or null on the step that creates it: the loop then starts
  // from `state_init` (zeros, Adagrad's initial_accumulator_value) without
  // reading anything. SGD's first-step buffer is the gradient (see below).
  const void* state_in[3] = {nullptr, nullptr, nullptr};
  double state_init[3] = {0, 0, 0};
  void* param_out = nullptr;
  void* state_out[3] = {nullptr, nullptr, nullptr};
  double step = 1;  // this step's count (Adam's bias corrections, Adagrad's clr)
};

// state slots: exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad).
void fused_adam_cpu(const OpContext& ctx, const kernels::AdamHyper& h, const std::vector<OptimTensorIO>& ts);
// state slot: momentum_buffer when momentum != 0 (null state_in: the buffer
// starts as the gradient, PyTorch's clone(d_p)).
void fused_sgd_cpu(const OpContext& ctx, const kernels::SgdHyper& h, const std::vector<OptimTensorIO>& ts);
// state slot: sum.
void fused_adagrad_cpu(const OpContext& ctx, const kernels::AdagradHyper& h, const std::vector<OptimTensorIO>& ts);

// Muon (ops/cpu/optim_muon.cpp): per 2-D parameter (rows[i] x cols[i]), a
// momentum pass (state slot: momentum_buffer), Newton-Schulz on the update
// in the math type (float32 via cblas_sgemm; float64 params use dgemm), and
// a parameter pass. Parameters run in parallel on the pool; one matrix's
// Newton-Schulz runs on one core.
void fused_muon_cpu(const OpContext& ctx, const kernels::MuonHyper& h, const std::vector<OptimTensorIO>& ts,
                    const std::vector<int64_t>& rows, const std::vector<int64_t>& cols);

// A backend's fused passes (these CPU loops, or ops/cuda/optim_fused.cu's
// single launches) over OptimTensorIO pointers on the context's device.
struct OptimPasses {
  void (*adam)(const OpContext&, const kernels::AdamHyper&, const std::vector<OptimTensorIO>&);
  void (*sgd)(const OpContext&, const kernels::SgdHyper&, const std::vector<OptimTensorIO>&);
  void (*adagrad)(const OpContext&, const kernels::AdagradHyper&, const std::vector<OptimTensorIO>&);
};

// The kernel of optimizer `op` ("optim.sgd", "optim.adam", "optim.adamw",
// "optim.adagrad"; ops/cpu/optim.cpp) with its fused pass from `passes`:
// validation, state reads, new buffers and the job's writes are the CPU
// kernel's, on the context's device (stored tensors still in host memory are
// moved there first).
KernelFn make_optim_kernel(std::string_view op, const OptimPasses& passes);

// Whether the AVX2 build of the loops is in use (benchmarks report it).
bool optim_loop_uses_avx2();

}  // namespace tensord
