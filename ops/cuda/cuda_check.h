// Every CUDA runtime call is checked (ggml's CUDA_CHECK): failures become
// tensord::Error with the call, file and line.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "ops/error.h"

namespace tensord::cuda {

[[noreturn]] inline void cuda_fail(cudaError_t e, const char* expr, const char* file, int line) {
  throw Error(ErrorCode::kInternal, std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                                        ") in " + expr + " at " + file + ":" + std::to_string(line));
}

}  // namespace tensord::cuda

#define TENSORD_CUDA_CHECK(expr)                                                                                    \
  do {                                                                                                              \
    cudaError_t tensord_cuda_err_ = (expr);                                                                         \
    if (tensord_cuda_err_ != cudaSuccess) ::tensord::cuda::cuda_fail(tensord_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)
