// cuSOLVER batched eigh (see eigh_batched.cuh).
//
// Layout: cuSOLVER is column-major; our row-major A read column-major is
// A^T = conj(A), so the triangle flag is swapped and cuSOLVER decomposes
// conj(A): same eigenvalues, eigenvectors conjugated, returned as the
// columns of a column-major Z. A transpose-conjugate kernel writes
// V[r][j] = conj(Z[j][r]) (the CPU LAPACK path does the same on the host).
#include <cusolverDn.h>

#include <string>
#include <vector>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/eigh_batched.cuh"
#include "ops/error.h"
#include "ops/kernels/common.h"

//
// Solvers: cusolverDnXsyevBatched where the toolkit has it (CUDA >= 12.6.2);
// else cusolverDn<t>syevjBatched (Jacobi, sorted output) for n <= 32, its
// limit, and cusolverDnXsyevd once per matrix above. The fallback is
// compiled in every build (so nvcc checks it everywhere);
// defining TENSORD_EIGH_FORCE_SYEVJ at compile time makes it the one used.
#if defined(CUSOLVER_VERSION) && CUSOLVER_VERSION >= 11701 && !defined(TENSORD_EIGH_FORCE_SYEVJ)  // 11.7.1 = 12.6 U2
#define TENSORD_HAVE_XSYEV_BATCHED 1
#endif

namespace tensord::cuda {
namespace {

const char* cusolver_status_name(cusolverStatus_t s) {
  switch (s) {
    case CUSOLVER_STATUS_NOT_INITIALIZED:
      return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED:
      return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE:
      return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH:
      return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED:
      return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR:
      return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_NOT_SUPPORTED:
      return "CUSOLVER_STATUS_NOT_SUPPORTED";
    default:
      return "cusolverStatus";
  }
}

void cusolver_check(cusolverStatus_t s, const char* expr, const char* file, int line) {
  if (s != CUSOLVER_STATUS_SUCCESS) {
    throw Error(ErrorCode::kInternal, std::string("cuSOLVER error ") + cusolver_status_name(s) + " (" +
                                          std::to_string(static_cast<int>(s)) + ") in " + expr + " at " + file + ":" +
                                          std::to_string(line));
  }
}

#define TENSORD_CUSOLVER_CHECK(expr) cusolver_check((expr), #expr, __FILE__, __LINE__)

// One device buffer that only grows.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  void* reserve(size_t want) {
    if (want > bytes) {
      if (ptr) cudaFree(ptr);
      ptr = nullptr;
      bytes = 0;
      TENSORD_CUDA_CHECK(cudaMalloc(&ptr, want));
      bytes = want;
    }
    return ptr;
  }
  void release() {
    if (ptr) cudaFree(ptr);  // at thread exit the context may be gone: ignore errors
    ptr = nullptr;
    bytes = 0;
  }
};

// Per-thread cuSOLVER state: handle, params and workspaces, reused.
struct Workspace {
  cusolverDnHandle_t handle = nullptr;
  cusolverDnParams_t params = nullptr;
  int device = -1;
  syevjInfo_t syevj = nullptr;  // the fallback's Jacobi parameters (sorted eigenvalues)
  DeviceBuffer work, z, info, flag;
  std::vector<unsigned char> host;

  void bind(int dev) {
    if (handle && dev != device) release();
    if (!handle) {
      TENSORD_CUSOLVER_CHECK(cusolverDnCreate(&handle));
      TENSORD_CUSOLVER_CHECK(cusolverDnCreateParams(&params));
      device = dev;
    }
  }
  void release() {
    work.release();
    z.release();
    info.release();
    flag.release();
    if (syevj) cusolverDnDestroySyevjInfo(syevj);
    syevj = nullptr;
    if (params) cusolverDnDestroyParams(params);
    if (handle) cusolverDnDestroy(handle);
    params = nullptr;
    handle = nullptr;
    device = -1;
  }
  ~Workspace() { release(); }
};

Workspace& workspace() {
  thread_local Workspace ws;
  return ws;
}

template <class T>
TENSORD_INLINE bool finite_elem(T x) {
  return isfinite(x);
}
TENSORD_INLINE bool finite_elem(float2 x) {
  return isfinite(x.x) && isfinite(x.y);
}
TENSORD_INLINE bool finite_elem(double2 x) {
  return isfinite(x.x) && isfinite(x.y);
}

template <class T>
TENSORD_INLINE void zero_imag(T&) {}
TENSORD_INLINE void zero_imag(float2& x) {
  x.y = 0;
}
TENSORD_INLINE void zero_imag(double2& x) {
  x.y = 0;
}

// flag = 1 + the first (any) matrix index with a non-finite entry in the
// read triangle (the diagonal's imaginary part is ignored, as cuSOLVER does).
template <class T>
__global__ void find_non_finite(const T* a, int64_t batch, int64_t n, bool upper, unsigned long long* flag) {
  const int64_t total = batch * n * n;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = (e / n) % n, j = e % n;
    if (upper ? j < i : j > i) continue;
    T x = a[e];
    if (i == j) zero_imag(x);
    if (!finite_elem(x)) atomicMax(flag, static_cast<unsigned long long>(e / (n * n) + 1));
  }
}

template <class T>
TENSORD_INLINE T conj_elem(T x) {
  return x;
}
TENSORD_INLINE float2 conj_elem(float2 x) {
  return make_float2(x.x, -x.y);
}
TENSORD_INLINE double2 conj_elem(double2 x) {
  return make_double2(x.x, -x.y);
}

// v[b][r][j] = conj(z[b][j][r]).
template <class T>
__global__ void transpose_conj(const T* z, T* v, int64_t batch, int64_t n) {
  const int64_t total = batch * n * n;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = e / (n * n), r = (e / n) % n, j = e % n;
    v[e] = conj_elem(z[b * n * n + j * n + r]);
  }
}

unsigned grid_for(int64_t total) {
  const int64_t blocks = (total + 255) / 256;
  return static_cast<unsigned>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

struct Types {
  cudaDataType a, w;
  size_t elem, real;
};

Types types_of(DType t) {
  switch (t) {
    case DType::kFloat32:
      return {CUDA_R_32F, CUDA_R_32F, 4, 4};
    case DType::kFloat64:
      return {CUDA_R_64F, CUDA_R_64F, 8, 8};
    case DType::kComplex64:
      return {CUDA_C_32F, CUDA_R_32F, 8, 4};
    case DType::kComplex128:
      return {CUDA_C_64F, CUDA_R_64F, 16, 8};
    default:
      throw Error(ErrorCode::kDtypeMismatch,
                  "linalg.eigh: the CUDA path takes float32, float64, complex64 or complex128, got " +
                      std::string(dtype_name(t)));
  }
}

template <class T>
void launch_checks(const void* a, int64_t batch, int64_t n, bool upper, unsigned long long* flag, cudaStream_t stream) {
  const int64_t total = batch * n * n;
  find_non_finite<T><<<grid_for(total), 256, 0, stream>>>(static_cast<const T*>(a), batch, n, upper, flag);
}

template <class T>
void launch_transpose(const void* z, void* v, int64_t batch, int64_t n, cudaStream_t stream) {
  const int64_t total = batch * n * n;
  transpose_conj<T><<<grid_for(total), 256, 0, stream>>>(static_cast<const T*>(z), static_cast<T*>(v), batch, n);
}

// The typed syevjBatched entry points behind one overload set.
cusolverStatus_t syevj_batched_size(cusolverDnHandle_t h, cusolverEigMode_t j, cublasFillMode_t f, int n,
                                    const float* a, const float* w, int* lwork, syevjInfo_t p, int batch) {
  return cusolverDnSsyevjBatched_bufferSize(h, j, f, n, a, n, w, lwork, p, batch);
}
cusolverStatus_t syevj_batched_size(cusolverDnHandle_t h, cusolverEigMode_t j, cublasFillMode_t f, int n,
                                    const double* a, const double* w, int* lwork, syevjInfo_t p, int batch) {
  return cusolverDnDsyevjBatched_bufferSize(h, j, f, n, a, n, w, lwork, p, batch);
}
cusolverStatus_t syevj_batched_size(cusolverDnHandle_t h, cusolverEigMode_t j, cublasFillMode_t f, int n,
                                    const cuComplex* a, const float* w, int* lwork, syevjInfo_t p, int batch) {
  return cusolverDnCheevjBatched_bufferSize(h, j, f, n, a, n, w, lwork, p, batch);
}
cusolverStatus_t syevj_batched_size(cusolverDnHandle_t h, cusolverEigMode_t j, cublasFillMode_t f, int n,
                                    const cuDoubleComplex* a, const double* w, int* lwork, syevjInfo_t p, int batch) {
  return cusolverDnZheevjBatched_bufferSize(h, j, f, n, a, n, w, lwork, p, batch);
}
cusolverStatus_t syevj_batched(cusolverDnHandle_t h, cusolverEigMode_t j, cublasFillMode_t f, int n, float* a, float* w,
                               float* work, int lwork, int* info, syevjInfo_t p, int batch) {
  return cusolverDnSsyevjBatched(h, j, f, n, a, n, w, work, lwork, info, p, batch);
}
cusolverStatus_t syevj_batched(cusolverDnHandle_t h, cusolverEigMode_t j, cublasFillMode_t f, int n, double* a,
                               double* w, double* work, int lwork, int* info, syevjInfo_t p, int batch) {
  return cusolverDnDsyevjBatched(h, j, f, n, a, n, w, work, lwork, info, p, batch);
}
cusolverStatus_t syevj_batched(cusolverDnHandle_t h, cusolverEigMode_t j, cublasFillMode_t f, int n, cuComplex* a,
                               float* w, cuComplex* work, int lwork, int* info, syevjInfo_t p, int batch) {
  return cusolverDnCheevjBatched(h, j, f, n, a, n, w, work, lwork, info, p, batch);
}
cusolverStatus_t syevj_batched(cusolverDnHandle_t h, cusolverEigMode_t j, cublasFillMode_t f, int n, cuDoubleComplex* a,
                               double* w, cuDoubleComplex* work, int lwork, int* info, syevjInfo_t p, int batch) {
  return cusolverDnZheevjBatched(h, j, f, n, a, n, w, work, lwork, info, p, batch);
}

// syevjBatched's largest n.
constexpr int64_t kSyevjBatchedMaxN = 32;

// The fallback, n <= 32: syevjBatched on z in place (eigenvalues sorted
// ascending), chunked so that each call's batch fits an int.
template <class T, class R>
void solve_syevj_batched(Workspace& ws, cusolverEigMode_t jobz, cublasFillMode_t fill, int64_t n, int64_t batch,
                         void* z, void* w, int* info) {
  if (!ws.syevj) {
    TENSORD_CUSOLVER_CHECK(cusolverDnCreateSyevjInfo(&ws.syevj));
    TENSORD_CUSOLVER_CHECK(cusolverDnXsyevjSetSortEig(ws.syevj, 1));
  }
  constexpr int64_t kChunk = int64_t{1} << 24;
  const int ni = static_cast<int>(n);
  for (int64_t b0 = 0; b0 < batch; b0 += kChunk) {
    const int nb = static_cast<int>(batch - b0 < kChunk ? batch - b0 : kChunk);
    T* a = static_cast<T*>(z) + b0 * n * n;
    R* wv = static_cast<R*>(w) + b0 * n;
    int lwork = 0;
    TENSORD_CUSOLVER_CHECK(syevj_batched_size(ws.handle, jobz, fill, ni, a, wv, &lwork, ws.syevj, nb));
    T* work = static_cast<T*>(ws.work.reserve(static_cast<size_t>(lwork > 0 ? lwork : 1) * sizeof(T)));
    TENSORD_CUSOLVER_CHECK(syevj_batched(ws.handle, jobz, fill, ni, a, wv, work, lwork, info + b0, ws.syevj, nb));
  }
}

// The fallback, n > 32: cusolverDnXsyevd once per matrix (one workspace
// query; each matrix writes its own info).
void solve_xsyevd_each(Workspace& ws, const Types& ty, cusolverEigMode_t jobz, cublasFillMode_t fill, int64_t n,
                       int64_t batch, void* z, void* w, int* info) {
  size_t dbytes = 0, hbytes = 0;
  TENSORD_CUSOLVER_CHECK(
      cusolverDnXsyevd_bufferSize(ws.handle, ws.params, jobz, fill, n, ty.a, z, n, ty.w, w, ty.a, &dbytes, &hbytes));
  void* dwork = ws.work.reserve(dbytes > 0 ? dbytes : 1);
  if (ws.host.size() < hbytes) ws.host.resize(hbytes);
  for (int64_t b = 0; b < batch; ++b) {
    void* a = static_cast<unsigned char*>(z) + static_cast<size_t>(b * n * n) * ty.elem;
    void* wb = static_cast<unsigned char*>(w) + static_cast<size_t>(b * n) * ty.real;
    TENSORD_CUSOLVER_CHECK(cusolverDnXsyevd(ws.handle, ws.params, jobz, fill, n, ty.a, a, n, ty.w, wb, ty.a, dwork,
                                            dbytes, hbytes ? ws.host.data() : nullptr, hbytes, info + b));
  }
}

// Unused (but still compiled) where cusolverDnXsyevBatched is available.
[[maybe_unused]] const char* solve_fallback(Workspace& ws, DType dtype, const Types& ty, cusolverEigMode_t jobz,
                                            cublasFillMode_t fill, int64_t n, int64_t batch, void* z, void* w,
                                            int* info) {
  if (n > kSyevjBatchedMaxN) {
    solve_xsyevd_each(ws, ty, jobz, fill, n, batch, z, w, info);
    return "cusolverDnXsyevd";
  }
  switch (dtype) {
    case DType::kFloat32:
      solve_syevj_batched<float, float>(ws, jobz, fill, n, batch, z, w, info);
      break;
    case DType::kFloat64:
      solve_syevj_batched<double, double>(ws, jobz, fill, n, batch, z, w, info);
      break;
    case DType::kComplex64:
      solve_syevj_batched<cuComplex, float>(ws, jobz, fill, n, batch, z, w, info);
      break;
    default:
      solve_syevj_batched<cuDoubleComplex, double>(ws, jobz, fill, n, batch, z, w, info);
      break;
  }
  return "cusolverDn<t>syevjBatched";
}

#if defined(TENSORD_HAVE_XSYEV_BATCHED)
const char* solve_xsyev_batched(Workspace& ws, const Types& ty, cusolverEigMode_t jobz, cublasFillMode_t fill,
                                int64_t n, int64_t batch, void* z, void* w, int* info) {
  size_t dbytes = 0, hbytes = 0;
  TENSORD_CUSOLVER_CHECK(cusolverDnXsyevBatched_bufferSize(ws.handle, ws.params, jobz, fill, n, ty.a, z, n, ty.w, w,
                                                           ty.a, &dbytes, &hbytes, batch));
  void* dwork = ws.work.reserve(dbytes > 0 ? dbytes : 1);
  if (ws.host.size() < hbytes) ws.host.resize(hbytes);
  TENSORD_CUSOLVER_CHECK(cusolverDnXsyevBatched(ws.handle, ws.params, jobz, fill, n, ty.a, z, n, ty.w, w, ty.a, dwork,
                                                dbytes, hbytes ? ws.host.data() : nullptr, hbytes, info, batch));
  return "cusolverDnXsyevBatched";
}
#endif

}  // namespace

void cuda_eigh_batched(DType dtype, int64_t batch, int64_t n, const void* a_dev, void* w_dev, void* v_dev, bool upper,
                       bool vectors, cudaStream_t stream) {
  const Types ty = types_of(dtype);
  if (batch <= 0 || n <= 0) return;
  int dev = 0;
  TENSORD_CUDA_CHECK(cudaGetDevice(&dev));
  Workspace& ws = workspace();
  ws.bind(dev);
  TENSORD_CUSOLVER_CHECK(cusolverDnSetStream(ws.handle, stream));

  // 1. Non-finite input: numerical_error naming the matrix, before solving.
  auto* flag = static_cast<unsigned long long*>(ws.flag.reserve(sizeof(unsigned long long)));
  TENSORD_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(unsigned long long), stream));
  switch (dtype) {
    case DType::kFloat32:
      launch_checks<float>(a_dev, batch, n, upper, flag, stream);
      break;
    case DType::kFloat64:
      launch_checks<double>(a_dev, batch, n, upper, flag, stream);
      break;
    case DType::kComplex64:
      launch_checks<float2>(a_dev, batch, n, upper, flag, stream);
      break;
    default:
      launch_checks<double2>(a_dev, batch, n, upper, flag, stream);
      break;
  }
  TENSORD_CUDA_CHECK(cudaGetLastError());
  unsigned long long bad = 0;
  TENSORD_CUDA_CHECK(cudaMemcpyAsync(&bad, flag, sizeof(bad), cudaMemcpyDeviceToHost, stream));
  TENSORD_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (bad) {
    throw Error(ErrorCode::kNumericalError,
                "linalg.eigh: the input contains NaN or infinity (matrix " + std::to_string(bad - 1) + ")");
  }

  // 2. cuSOLVER overwrites its input with Z: work on a copy.
  const size_t mat_bytes = static_cast<size_t>(batch * n * n) * ty.elem;
  void* z = ws.z.reserve(mat_bytes);
  TENSORD_CUDA_CHECK(cudaMemcpyAsync(z, a_dev, mat_bytes, cudaMemcpyDeviceToDevice, stream));
  const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const cublasFillMode_t fill = upper ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;  // swapped: see top
  int* info = static_cast<int*>(ws.info.reserve(static_cast<size_t>(batch) * sizeof(int)));
#if defined(TENSORD_HAVE_XSYEV_BATCHED)
  const char* solver = solve_xsyev_batched(ws, ty, jobz, fill, n, batch, z, w_dev, info);
#else
  const char* solver = solve_fallback(ws, dtype, ty, jobz, fill, n, batch, z, w_dev, info);
#endif

  // 3. Per-matrix info: > 0 did not converge, < 0 a bad argument (a bug).
  std::vector<int> host_info(static_cast<size_t>(batch));
  TENSORD_CUDA_CHECK(
      cudaMemcpyAsync(host_info.data(), info, host_info.size() * sizeof(int), cudaMemcpyDeviceToHost, stream));
  if (vectors) {
    switch (dtype) {
      case DType::kFloat32:
        launch_transpose<float>(z, v_dev, batch, n, stream);
        break;
      case DType::kFloat64:
        launch_transpose<double>(z, v_dev, batch, n, stream);
        break;
      case DType::kComplex64:
        launch_transpose<float2>(z, v_dev, batch, n, stream);
        break;
      default:
        launch_transpose<double2>(z, v_dev, batch, n, stream);
        break;
    }
    TENSORD_CUDA_CHECK(cudaGetLastError());
  }
  TENSORD_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int64_t b = 0; b < batch; ++b) {
    const int i = host_info[static_cast<size_t>(b)];
    if (i > 0) {
      throw Error(ErrorCode::kNumericalError, std::string("linalg.eigh: ") + solver + " did not converge (matrix " +
                                                  std::to_string(b) + ", info " + std::to_string(i) + ")");
    }
    if (i < 0) {
      throw Error(ErrorCode::kInternal,
                  std::string("linalg.eigh: ") + solver + " rejected argument " + std::to_string(-i));
    }
  }
}

void cuda_eigh_release_workspace() {
  workspace().release();
}

}  // namespace tensord::cuda
