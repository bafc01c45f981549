// linalg.eigh on the CPU, batched Jacobi path: picks the widest ISA kernel
// this CPU runs (runtime CPUID; TENSORD_CPU_ISA=portable|avx2|avx512 caps
// it), cuts the batch into groups of `lanes` matrices and spreads the groups
// over the pool. The math is in eigh_jacobi_impl.h / ops/kernels/eigh_jacobi.h.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ops/cpu/eigh_batched.h"
#include "ops/cpu/linalg_kernels.h"
#include "ops/error.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx512f") && cpu_has_avx2();
#else
  return false;
#endif
}

const EighIsaKernels* kernels_for(EighPath path) {
  switch (path) {
    case EighPath::kJacobiPortable:
      return eigh_kernels_portable();
    case EighPath::kJacobiAvx2:
      return cpu_has_avx2() ? eigh_kernels_avx2() : nullptr;
    case EighPath::kJacobiAvx512:
      return cpu_has_avx512() ? eigh_kernels_avx512() : nullptr;
    default:
      return nullptr;
  }
}

// The widest kernel this CPU and TENSORD_CPU_ISA allow (read once).
EighPath best_jacobi_path() {
  static const EighPath best = [] {
    const char* env = std::getenv("TENSORD_CPU_ISA");
    const std::string cap = env ? env : "";
    if (cap == "portable" || cap == "scalar") return EighPath::kJacobiPortable;
    if (cap != "avx2" && kernels_for(EighPath::kJacobiAvx512)) return EighPath::kJacobiAvx512;
    if (kernels_for(EighPath::kJacobiAvx2)) return EighPath::kJacobiAvx2;
    return EighPath::kJacobiPortable;
  }();
  return best;
}

int dtype_index(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 0;
    case DType::kFloat64:
      return 1;
    case DType::kComplex64:
      return 2;
    case DType::kComplex128:
      return 3;
    default:
      return -1;
  }
}

// Per-thread workspace, 64-byte aligned, reused across groups and calls.
void* group_workspace(size_t bytes) {
  thread_local std::vector<unsigned char> buf;
  if (buf.size() < bytes + 64) buf.resize(bytes + 64);
  const auto addr = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - addr % 64) % 64);
}

// Largest n the Jacobi path takes: above it LAPACK wins at every batch size
// (see the crossover table in eigh_cpu below).
constexpr int64_t kJacobiMaxN = 128;

}  // namespace

bool eigh_path_available(EighPath path) {
  if (path == EighPath::kAuto || path == EighPath::kLapack) return true;
  return kernels_for(path) != nullptr;
}

const char* eigh_jacobi_isa_name() {
  return kernels_for(best_jacobi_path())->name;
}

void eigh_jacobi_cpu(const OpContext& ctx, const Tensor& a, char uplo, const Tensor& w, const Tensor* v, const char* op,
                     EighPath path) {
  if (path == EighPath::kAuto) path = best_jacobi_path();
  const EighIsaKernels* k = kernels_for(path);
  TENSORD_ASSERT(k != nullptr);
  const int di = dtype_index(a.dtype());
  TENSORD_ASSERT(di >= 0);
  const int64_t n = a.shape().back();
  if (n == 0 || a.numel() == 0) return;
  TENSORD_ASSERT(n <= kJacobiMaxN);
  const int64_t nn = n * n, batch = a.numel() / nn;
  const int64_t lanes = k->lanes[di];
  const int64_t planes = k->complex_planes[di];
  const size_t in_bytes = dtype_size(a.dtype());             // one element
  const size_t real_bytes = dtype_size(to_real(a.dtype()));  // one eigenvalue
  // Workspace (eigh_jacobi_group): A's packed triangle and V^T (planes
  // vectors per element), 4 n rotation-parameter vectors, n row pointers, n ints.
  const size_t work_bytes = static_cast<size_t>((n * (n + 1) / 2 + nn) * planes * k->vector_bytes[di]) +
                            static_cast<size_t>(4 * n * k->vector_bytes[di]) +
                            static_cast<size_t>(n) * (sizeof(void*) + sizeof(int));
  const auto* src = static_cast<const unsigned char*>(a.data());
  auto* w_out = static_cast<unsigned char*>(w.data());
  auto* v_out = v ? static_cast<unsigned char*>(v->data()) : nullptr;
  const int64_t groups = (batch + lanes - 1) / lanes;
  // About 8 n^3 flops per matrix and sweep, ~8 sweeps: aim for ~0.25 ms chunks.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 21) / std::max<int64_t>(1, lanes * 64 * n * n * n));
  const EighGroupFn fn = k->fn[di];
  ctx.parallel_for(groups, grain, [&](int64_t g0, int64_t g1) {
    void* work = group_workspace(work_bytes);
    for (int64_t g = g0; g < g1; ++g) {
      if (ctx.cancelled && ctx.cancelled->load(std::memory_order_relaxed)) {
        throw Error(ErrorCode::kCancelled, std::string(op) + ": cancelled");
      }
      const int64_t first = g * lanes;
      EighGroupArgs args{};
      args.in = src + static_cast<size_t>(first * nn) * in_bytes;
      args.count = std::min(lanes, batch - first);
      args.n = static_cast<int>(n);
      args.lower = uplo == 'L';
      args.w = w_out + static_cast<size_t>(first * n) * real_bytes;
      args.v = v_out ? v_out + static_cast<size_t>(first * nn) * in_bytes : nullptr;
      args.work = work;
      int64_t bad = 0;
      const int rc = fn(args, &bad);
      if (rc == kEighNonFinite) {
        throw Error(ErrorCode::kNumericalError, std::string(op) + ": the input contains NaN or infinity (matrix " +
                                                    std::to_string(first + bad) + ")");
      }
      if (rc == kEighNoConvergence) {
        throw Error(ErrorCode::kNumericalError, std::string(op) + ": Jacobi iteration did not converge (matrices " +
                                                    std::to_string(first) + ".." +
                                                    std::to_string(first + args.count - 1) + ")");
      }
    }
  });
}

// Path choice: eigh_use_jacobi (the measured crossover, below).
void eigh_cpu(const OpContext& ctx, const Tensor& a, char uplo, const Tensor& w, const Tensor* v, const char* op,
              EighPath path) {
  TENSORD_ASSERT(uplo == 'L' || uplo == 'U');
  if (dtype_index(a.dtype()) < 0) {
    throw Error(ErrorCode::kDtypeMismatch,
                std::string(op) + ": not implemented for dtype " + std::string(dtype_name(a.dtype())));
  }
  const int64_t n = a.shape().empty() ? 0 : a.shape().back();
  if (path == EighPath::kAuto) {
    const int64_t batch = n == 0 ? 0 : a.numel() / (n * n);
    path = eigh_use_jacobi(a.dtype(), n, batch) ? best_jacobi_path() : EighPath::kLapack;
  }
  if (path == EighPath::kLapack) return eigh_lapack_cpu(ctx, a, uplo, w, v, op);
  if (n > kJacobiMaxN) {
    throw Error(ErrorCode::kInvalidArgument, std::string(op) + ": the Jacobi path takes n <= " +
                                                 std::to_string(kJacobiMaxN) + ", got " + std::to_string(n));
  }
  eigh_jacobi_cpu(ctx, a, uplo, w, v, op, path);
}

// CROSSOVER, measured with bench/eigh_kernel_bench (median of 3-5 runs,
// 2 threads, AVX-512 kernels vs LAPACK ?syevd/?heevd, eigenvectors on) on
// this 2-core AMD EPYC; times in ms, Jacobi / LAPACK (noisy shared machine):
//   float32   n=8   b=1 0.005/0.016  b=4 0.005/0.058  b=256 0.11/13.5
//             n=32  b=1 0.21/0.20    b=4 0.21/0.84   b=256 4.4/54
//             n=64  b=1 1.8/0.43     b=4 1.8/11.6    b=256 31/163
//             n=96  b=1 13.8/1.1     b=4 6.9/12.0    b=256 114/405
//             n=128 b=4 16.6/8.0     b=16 46/28      b=256 277/524
//   float64   n=32  b=1 0.25/0.16    b=4 0.28/0.82   b=256 9.5/57
//             n=64  b=4 2.0/0.97     b=16 4.3/8.0    b=256 71/160
//   complex64 n=8   b=1 0.009/0.005  b=16 0.010/0.083 b=256 0.16/1.34
//             n=32  b=1 0.42/0.08    b=16 0.46/1.44  b=256 16.5/41
//             n=64  b=16 10.5/35.6   b=256 100/127
//             n=128 b=16 58/38       b=256 931/1304
//   complex128 n=32 b=16 1.06/1.58   b=256 18.8/66.9
//             n=64  b=16 8.7/7.9     b=256 137/89
//             n=128 b=16 82/31       b=256 1397/690
// A group of `lanes` matrices costs about what one matrix does, so small
// batches at larger n go to LAPACK.
bool eigh_use_jacobi(DType t, int64_t n, int64_t batch) {
  const bool cplx = is_complex(t);
  const bool f64 = t == DType::kFloat64 || t == DType::kComplex128;
  if (!cplx) {
    if (n <= 16) return true;
    if (n <= 32) return batch >= 2;
    if (n <= 64) return batch >= (f64 ? 8 : 4);
    if (n <= 96) return batch >= (f64 ? 16 : 4);
    if (n <= kJacobiMaxN) return batch >= 64 && !f64;
    return false;
  }
  if (n <= 8) return batch >= 4;
  if (n <= 32) return batch >= 16;
  if (n <= 64) return !f64 && batch >= 16;
  return false;
}

}  // namespace tensord
