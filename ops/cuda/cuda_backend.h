// The CUDA backend: device memory, streams, events and copies through the
// CUDA runtime. Linked against cudart (never libcuda): driver-API functions
// are reached through cudaGetDriverEntryPointByVersion, so the binary starts
// on machines with no driver and make_cuda_backend() just returns nullptr.
#pragma once

#include <memory>

#include "ops/backend.h"
#include "ops/cuda_arch.h"

namespace tensord {

// A CUDA backend over every visible device, or nullptr when the runtime
// reports no device (no driver, no GPU) or a device runs none of the
// kernels this build compiled (its compute capability against
// TENSORD_CUDA_ARCHITECTURES, ops/cuda_arch.h); `why_not` says which.
std::unique_ptr<Backend> make_cuda_backend(std::string* why_not = nullptr);
// The architecture list this build's CUDA kernels were compiled for.
const CudaArchList& cuda_built_architectures();

// Number of CUDA devices the runtime sees (0 without a driver or GPU).
int cuda_device_count();

}  // namespace tensord
