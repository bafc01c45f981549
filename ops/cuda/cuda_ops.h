// The CUDA backend's op kernels, added to the registered ops by
// cuda_backend.cu's KernelRegistration (ops/op_registry.h). Each family
// registers kernels["cuda"] and, where it takes only some calls,
// accepts["cuda"]: the rest run on the CPU kernels beside the device
// (graphs/device_placement.h). Kernels launch on the job's stream; wrapped
// Python numbers reach them in host memory and become launch arguments.
// CUDA-only header (nvcc).
#pragma once

#include <cuda_runtime.h>

#include "ops/op_registry.h"

namespace tensord::cuda {

// The job's stream (OpContext::stream) as a cudaStream_t; ctx.backend must
// be the CUDA backend.
cudaStream_t raw_stream(const OpContext& ctx);

// float32 elementwise ops: add, sub, mul, div (true division), maximum,
// minimum, comparisons (bool results), neg, abs, exp, log, sqrt, rsqrt,
// sigmoid, tanh, relu; broadcasting up to 8 dims.
void register_elementwise_kernels(OpRegistry& r);
// float32 matmul of 2-D operands through cuBLAS; linalg.eigh and
// linalg.eigvalsh through cuSOLVER (ops/cuda/eigh_batched.cu).
void register_linalg_kernels(OpRegistry& r);
// optim.sgd, optim.adam, optim.adamw, optim.adagrad: one multi-tensor kernel
// launch per step (ops/cuda/optim_fused.cu).
void register_optim_kernels(OpRegistry& r);
// mx.quantize and mx.dequantize with ops/kernels/mx.h's arithmetic
// (ops/cuda/mx_quant.cu): the same bytes as the CPU loops.
void register_mx_kernels(OpRegistry& r);

}  // namespace tensord::cuda
