// Fused optimizers on CUDA: one multi-tensor-apply kernel launch per step for
// the whole list of tensors, whatever their number, sizes and dtypes. The
// element updates are ops/kernels/optim.h, the same code the CPU loop runs.
//
// Pointers in OptimTensorIO are device pointers here; the per-tensor and
// per-chunk tables travel in one small device buffer (stream-ordered
// allocation). register_optim_kernels (cuda_ops.h) makes these the "cuda"
// kernels of optim.sgd/adam/adamw/adagrad; tests/unit/cuda/optim_test.cpp
// also drives them directly and compares with the CPU loop.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "ops/cpu/optim_loop.h"

namespace tensord::cuda {

// Elements per chunk of the multi-tensor-apply table (one block per chunk).
inline constexpr int64_t kOptimChunk = 65536;

void fused_adam_cuda(const kernels::AdamHyper& h, const std::vector<OptimTensorIO>& ts, cudaStream_t stream);
void fused_sgd_cuda(const kernels::SgdHyper& h, const std::vector<OptimTensorIO>& ts, cudaStream_t stream);
void fused_adagrad_cuda(const kernels::AdagradHyper& h, const std::vector<OptimTensorIO>& ts, cudaStream_t stream);

// Launches of the optimizer kernel so far (tests check one per step).
int64_t optim_kernel_launches();

}  // namespace tensord::cuda
