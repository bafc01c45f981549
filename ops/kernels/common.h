// Host/device portability for kernel arithmetic shared by ops/cpu and ops/cuda.
#pragma once

#if defined(__CUDACC__)
#define TENSORD_HOST_DEVICE __host__ __device__
#define TENSORD_INLINE __host__ __device__ __forceinline__
#else
#define TENSORD_HOST_DEVICE
#define TENSORD_INLINE inline
#endif
