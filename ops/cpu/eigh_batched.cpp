// linalg.eigh on the CPU, batched SIMD paths: picks the widest ISA kernel
// this CPU runs (runtime CPUID; TENSORD_CPU_ISA=portable|avx2|avx512 caps
// it), cuts the batch into groups of `lanes` matrices and spreads the groups
// over the pool. Two algorithms, one matrix per SIMD lane: cyclic Jacobi
// (eigh_jacobi_impl.h, ops/kernels/eigh_jacobi.h; all dtypes) and
// Householder tridiagonalisation + implicit QL (eigh_tridiag_impl.h,
// ops/kernels/eigh_tridiag.h; real dtypes). eigh_auto_algorithm picks
// between them and LAPACK (thresholds: bench/README.md, batched eigh).
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

bool is_tridiag(EighPath path) {
  return path == EighPath::kTridiagPortable || path == EighPath::kTridiagAvx2 || path == EighPath::kTridiagAvx512;
}

const EighIsaKernels* kernels_for(EighPath path) {
  switch (path) {
    case EighPath::kJacobiPortable:
    case EighPath::kTridiagPortable:
      return eigh_kernels_portable();
    case EighPath::kJacobiAvx2:
    case EighPath::kTridiagAvx2:
      return cpu_has_avx2() ? eigh_kernels_avx2() : nullptr;
    case EighPath::kJacobiAvx512:
    case EighPath::kTridiagAvx512:
      return cpu_has_avx512() ? eigh_kernels_avx512() : nullptr;
    default:
      return nullptr;
  }
}

// The widest kernel this CPU and TENSORD_CPU_ISA allow (read once), as its
// Jacobi path.
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

EighPath as_tridiag(EighPath jacobi) {
  switch (jacobi) {
    case EighPath::kJacobiAvx512:
      return EighPath::kTridiagAvx512;
    case EighPath::kJacobiAvx2:
      return EighPath::kTridiagAvx2;
    default:
      return EighPath::kTridiagPortable;
  }
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

// Largest n the SIMD paths take (workspace: (n (n+1)/2 + n^2) vectors per
// thread, 6 MiB at n = 256 on AVX-512).
constexpr int64_t kJacobiMaxN = 128;
constexpr int64_t kTridiagMaxN = 256;

}  // namespace

bool eigh_path_available(EighPath path) {
  if (path == EighPath::kAuto || path == EighPath::kLapack) return true;
  return kernels_for(path) != nullptr;
}

const char* eigh_jacobi_isa_name() {
  return kernels_for(best_jacobi_path())->name;
}

void eigh_simd_cpu(const OpContext& ctx, const Tensor& a, char uplo, const Tensor& w, const Tensor* v, const char* op,
                   EighPath path) {
  if (path == EighPath::kAuto) path = best_jacobi_path();
  const EighIsaKernels* k = kernels_for(path);
  TENSORD_ASSERT(k != nullptr);
  const int di = dtype_index(a.dtype());
  TENSORD_ASSERT(di >= 0);
  const int64_t n = a.shape().back();
  if (n == 0 || a.numel() == 0) return;
  // Complex dtypes have no tridiagonal kernel: they take Jacobi.
  const bool tridiag = is_tridiag(path) && k->tridiag[di] != nullptr;
  TENSORD_ASSERT(n <= (tridiag ? kTridiagMaxN : kJacobiMaxN));
  const int64_t nn = n * n, batch = a.numel() / nn;
  const int64_t lanes = k->lanes[di];
  const int64_t planes = k->complex_planes[di];
  const size_t in_bytes = dtype_size(a.dtype());             // one element
  const size_t real_bytes = dtype_size(to_real(a.dtype()));  // one eigenvalue
  // Workspace: A's packed triangle and V^T or Z (planes vectors per
  // element), then eigh_jacobi_group's 4 n vectors, n row pointers and n
  // ints, or eigh_tridiag_group's (5 + 2 sweeps per pass) n vectors and
  // lanes n ints.
  const int64_t extra = tridiag ? 5 + 2 * kEighTridiagSweepsPerPass : 4;
  const size_t work_bytes = static_cast<size_t>((n * (n + 1) / 2 + nn) * planes * k->vector_bytes[di]) +
                            static_cast<size_t>(extra * n * k->vector_bytes[di]) +
                            static_cast<size_t>(n) * (sizeof(void*) + sizeof(int) * static_cast<size_t>(lanes));
  const auto* src = static_cast<const unsigned char*>(a.data());
  auto* w_out = static_cast<unsigned char*>(w.data());
  auto* v_out = v ? static_cast<unsigned char*>(v->data()) : nullptr;
  const int64_t groups = (batch + lanes - 1) / lanes;
  // Jacobi: about 8 n^3 flops per matrix and sweep, ~8 sweeps; QL about a
  // tenth of that: aim for ~0.25 ms chunks.
  const int64_t per_group = lanes * (tridiag ? 8 : 64) * n * n * n;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 21) / std::max<int64_t>(1, per_group));
  const EighGroupFn fn = tridiag ? k->tridiag[di] : k->jacobi[di];
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
        throw Error(ErrorCode::kNumericalError, std::string(op) + (tridiag ? ": QL" : ": Jacobi") +
                                                    " iteration did not converge (matrices " + std::to_string(first) +
                                                    ".." + std::to_string(first + args.count - 1) + ")");
      }
    }
  });
}

// Path choice: eigh_auto_algorithm (the measured crossover).
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
    switch (eigh_auto_algorithm(a.dtype(), n, batch)) {
      case EighAlgorithm::kLapack:
        path = EighPath::kLapack;
        break;
      case EighAlgorithm::kJacobi:
        path = best_jacobi_path();
        break;
      case EighAlgorithm::kTridiag:
        path = as_tridiag(best_jacobi_path());
        break;
    }
  }
  if (path == EighPath::kLapack) return eigh_lapack_cpu(ctx, a, uplo, w, v, op);
  const int64_t max_n = is_tridiag(path) && !is_complex(a.dtype()) ? kTridiagMaxN : kJacobiMaxN;
  if (n > max_n) {
    throw Error(ErrorCode::kInvalidArgument, std::string(op) + ": the " + (max_n == kJacobiMaxN ? "Jacobi" : "QL") +
                                                 " path takes n <= " + std::to_string(max_n) + ", got " +
                                                 std::to_string(n));
  }
  eigh_simd_cpu(ctx, a, uplo, w, v, op, path);
}

// The thresholds are the crossovers measured with bench/eigh_kernel_bench
// (the table: bench/README.md, "Path crossover"): QL from n = 6 for real
// dtypes, Jacobi below it and for complex dtypes (no complex tridiagonal
// kernel), LAPACK for batches too small to fill a QL group's worth of its
// time (a group costs about what 1 .. 10 LAPACK calls do).
EighAlgorithm eigh_auto_algorithm(DType t, int64_t n, int64_t batch) {
  if (!is_complex(t)) {
    if (n < 6) return EighAlgorithm::kJacobi;
    if (n <= 32) return EighAlgorithm::kTridiag;
    int64_t min_batch = 24;
    if (n <= 48) {
      min_batch = 2;
    } else if (n <= 64) {
      min_batch = 4;
    } else if (n <= 96) {
      min_batch = 5;
    } else if (n <= 128) {
      min_batch = 8;
    } else if (n <= 192) {
      min_batch = 20;
    }
    return n <= kTridiagMaxN && batch >= min_batch ? EighAlgorithm::kTridiag : EighAlgorithm::kLapack;
  }
  const bool f64 = t == DType::kComplex128;
  if (n <= 8) return batch >= 4 ? EighAlgorithm::kJacobi : EighAlgorithm::kLapack;
  if (n <= 32) return batch >= 16 ? EighAlgorithm::kJacobi : EighAlgorithm::kLapack;
  if (n <= 64) return !f64 && batch >= 16 ? EighAlgorithm::kJacobi : EighAlgorithm::kLapack;
  return EighAlgorithm::kLapack;
}

}  // namespace tensord
