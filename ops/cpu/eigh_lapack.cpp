// linalg.eigh / linalg.eigvalsh on the CPU, large-n path: LAPACK's divide-and-conquer
// drivers (ssyevd, dsyevd, cheevd, zheevd, as PyTorch uses), one
// single-threaded call per matrix, matrices spread over the pool.
//
// Layout: LAPACK is column-major. Our row-major matrix A read column-major is
// A^T, so the row-major lower triangle is the column-major upper one (the
// uplo passed to LAPACK is swapped), and for Hermitian A, A^T = conj(A):
// LAPACK decomposes conj(A), whose eigenvalues are A's and whose
// eigenvectors are the conjugates of A's. LAPACK returns eigenvector j as
// column j of a column-major Z, i.e. row j of our buffer, so
// V[r][j] = conj(Z_buf[j][r]): a transpose plus, for complex, a conjugate.
#include <complex>
// LAPACK's complex types as std::complex (the override lapack.h documents).
#define lapack_complex_float std::complex<float>
#define lapack_complex_double std::complex<double>
#include <lapacke.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/cpu/linalg_kernels.h"
#include "ops/error.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

template <class T>
struct RealOf {
  using type = T;
};
template <class R>
struct RealOf<std::complex<R>> {
  using type = R;
};

template <class T>
constexpr bool kIsComplex = !std::is_same_v<T, typename RealOf<T>::type>;

// One interface over the four drivers (rwork is unused by the real ones).
lapack_int evd(char jobz, char uplo, lapack_int n, float* a, float* w, float* work, lapack_int lwork, float*,
               lapack_int, lapack_int* iwork, lapack_int liwork) {
  return LAPACKE_ssyevd_work(LAPACK_COL_MAJOR, jobz, uplo, n, a, n, w, work, lwork, iwork, liwork);
}
lapack_int evd(char jobz, char uplo, lapack_int n, double* a, double* w, double* work, lapack_int lwork, double*,
               lapack_int, lapack_int* iwork, lapack_int liwork) {
  return LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, jobz, uplo, n, a, n, w, work, lwork, iwork, liwork);
}
lapack_int evd(char jobz, char uplo, lapack_int n, std::complex<float>* a, float* w, std::complex<float>* work,
               lapack_int lwork, float* rwork, lapack_int lrwork, lapack_int* iwork, lapack_int liwork) {
  return LAPACKE_cheevd_work(LAPACK_COL_MAJOR, jobz, uplo, n, a, n, w, work, lwork, rwork, lrwork, iwork, liwork);
}
lapack_int evd(char jobz, char uplo, lapack_int n, std::complex<double>* a, double* w, std::complex<double>* work,
               lapack_int lwork, double* rwork, lapack_int lrwork, lapack_int* iwork, lapack_int liwork) {
  return LAPACKE_zheevd_work(LAPACK_COL_MAJOR, jobz, uplo, n, a, n, w, work, lwork, rwork, lrwork, iwork, liwork);
}

struct WorkSizes {
  lapack_int lwork = 1, lrwork = 1, liwork = 1;
};

// Workspace sizes: the larger of LAPACK's query answer (which may be the
// optimal, blocked size) and the documented minimum (a float query answer
// can round below it for large n).
template <class T>
WorkSizes work_sizes(char jobz, lapack_int n) {
  using R = typename RealOf<T>::type;
  T a[1] = {}, work[1] = {};
  R w[1] = {}, rwork[1] = {};
  lapack_int iwork[1] = {};
  lapack_int info = evd(jobz, 'L', n, a, w, work, -1, rwork, -1, iwork, -1);
  TENSORD_ASSERT(info == 0);
  const int64_t nn = n;
  WorkSizes s;
  const bool vec = jobz == 'V';
  int64_t lwork, lrwork = 1, liwork = vec ? 3 + 5 * nn : 1;
  if constexpr (kIsComplex<T>) {
    lwork = vec ? 2 * nn + nn * nn : nn + 1;
    lrwork = vec ? 1 + 5 * nn + 2 * nn * nn : nn;
    lrwork = std::max<int64_t>(lrwork, static_cast<int64_t>(std::ceil(static_cast<double>(rwork[0]))));
  } else {
    lwork = vec ? 1 + 6 * nn + 2 * nn * nn : 2 * nn + 1;
  }
  lwork = std::max<int64_t>(lwork, static_cast<int64_t>(std::ceil(static_cast<double>(std::real(work[0])))));
  liwork = std::max<int64_t>(liwork, iwork[0]);
  s.lwork = static_cast<lapack_int>(std::max<int64_t>(lwork, 1));
  s.lrwork = static_cast<lapack_int>(std::max<int64_t>(lrwork, 1));
  s.liwork = static_cast<lapack_int>(std::max<int64_t>(liwork, 1));
  return s;
}

// Per-thread buffers, grown as needed and reused across matrices and calls
// (no allocation per matrix in the hot loop).
template <class T>
struct Workspace {
  using R = typename RealOf<T>::type;
  std::vector<T> a, work;
  std::vector<R> rwork;
  std::vector<lapack_int> iwork;

  void reserve(size_t nn, size_t n, const WorkSizes& s) {
    // Debian's OpenBLAS 0.3.21 (zgemv_n_HASWELL, reached from zhetrd's
    // blocked zlatrd) reads past the end of its vectors: seen 19152 bytes,
    // about 4 columns (4 * n complex doubles) beyond the buffer for n = 300,
    // which segfaults when the buffer ends near the top of a thread's heap.
    // Slack of 16 columns plus 4 KiB after every LAPACK buffer keeps such
    // over-reads in mapped memory (test_eigh.py's complex n = 300 cases).
    const size_t slack_t = 16 * n + 4096 / sizeof(T);
    const size_t slack_r = 16 * n + 4096 / sizeof(R);
    if (a.size() < nn + slack_t) a.resize(nn + slack_t);
    if (work.size() < static_cast<size_t>(s.lwork) + slack_t) work.resize(static_cast<size_t>(s.lwork) + slack_t);
    if (rwork.size() < static_cast<size_t>(s.lrwork) + slack_r) rwork.resize(static_cast<size_t>(s.lrwork) + slack_r);
    if (iwork.size() < static_cast<size_t>(s.liwork)) iwork.resize(static_cast<size_t>(s.liwork));
  }
  // Large buffers are not kept between calls.
  void trim() {
    constexpr size_t kKeepBytes = size_t{64} << 20;
    if ((a.capacity() + work.capacity()) * sizeof(T) + rwork.capacity() * sizeof(R) > kKeepBytes) {
      a = {};
      work = {};
      rwork = {};
      iwork = {};
    }
  }
};

template <class T>
Workspace<T>& workspace() {
  thread_local Workspace<T> ws;
  return ws;
}

template <class T>
bool finite(const T& x) {
  if constexpr (kIsComplex<T>) {
    return std::isfinite(x.real()) && std::isfinite(x.imag());
  } else {
    return std::isfinite(x);
  }
}

template <class T>
T conj_if_complex(const T& x) {
  if constexpr (kIsComplex<T>) {
    return std::conj(x);
  } else {
    return x;
  }
}

template <class T>
void eigh_typed(const OpContext& ctx, const Tensor& a, char uplo, const Tensor& w, const Tensor* v, const char* op) {
  using R = typename RealOf<T>::type;
  const int64_t n = a.shape().back();
  if (n == 0 || a.numel() == 0) return;
  if (n > 46340) {  // n * n must fit LAPACK's int
    throw Error(ErrorCode::kInvalidArgument,
                std::string(op) + ": matrices larger than 46340 x 46340 are not supported");
  }
  // One OpenBLAS thread per call: the batch is split over the pool instead.
  // Left multi-threaded (its default, and what a direct caller such as
  // bench/eigh_kernel_bench got), each call's OpenBLAS threads compete with
  // the pool's for the same cores (oversubscribed: bench/README.md, batched
  // eigh).
  set_blas_single_threaded();
  const int64_t nn = n * n;
  const int64_t batch = a.numel() / nn;
  const char jobz = v ? 'V' : 'N';
  const char lapack_uplo = uplo == 'L' ? 'U' : 'L';
  const WorkSizes sizes = work_sizes<T>(jobz, static_cast<lapack_int>(n));
  const T* src = a.data_ptr<T>();
  R* w_out = w.data_ptr<R>();
  T* v_out = v ? v->data_ptr<T>() : nullptr;
  // About 1 ms of work per chunk: n^3 flops per matrix.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(1, n * n * n));
  ctx.parallel_for(batch, grain, [&](int64_t begin, int64_t end) {
    Workspace<T>& ws = workspace<T>();
    ws.reserve(static_cast<size_t>(nn), static_cast<size_t>(n), sizes);
    for (int64_t bi = begin; bi < end; ++bi) {
      if (ctx.cancelled && ctx.cancelled->load(std::memory_order_relaxed)) {
        throw Error(ErrorCode::kCancelled, std::string(op) + ": cancelled");
      }
      const T* m = src + bi * nn;
      // Only the triangle LAPACK reads has to be finite.
      for (int64_t i = 0; i < n; ++i) {
        const int64_t j0 = uplo == 'L' ? 0 : i, j1 = uplo == 'L' ? i + 1 : n;
        for (int64_t j = j0; j < j1; ++j) {
          if (!finite(m[i * n + j])) {
            throw Error(ErrorCode::kNumericalError,
                        std::string(op) + ": the input contains NaN or infinity (matrix " + std::to_string(bi) + ")");
          }
        }
      }
      std::memcpy(ws.a.data(), m, static_cast<size_t>(nn) * sizeof(T));
      const lapack_int info =
          evd(jobz, lapack_uplo, static_cast<lapack_int>(n), ws.a.data(), w_out + bi * n, ws.work.data(), sizes.lwork,
              ws.rwork.data(), sizes.lrwork, ws.iwork.data(), sizes.liwork);
      if (info > 0) {
        throw Error(ErrorCode::kNumericalError, std::string(op) + ": the algorithm failed to converge (matrix " +
                                                    std::to_string(bi) + ", info " + std::to_string(info) + ")");
      }
      TENSORD_ASSERT(info == 0);
      if (v_out) {
        T* dst = v_out + bi * nn;
        const T* z = ws.a.data();
        constexpr int64_t kTile = 32;
        for (int64_t r0 = 0; r0 < n; r0 += kTile) {
          for (int64_t c0 = 0; c0 < n; c0 += kTile) {
            for (int64_t r = r0; r < std::min(n, r0 + kTile); ++r) {
              for (int64_t c = c0; c < std::min(n, c0 + kTile); ++c) dst[r * n + c] = conj_if_complex(z[c * n + r]);
            }
          }
        }
      }
    }
    ws.trim();
  });
}

}  // namespace

void eigh_lapack_cpu(const OpContext& ctx, const Tensor& a, char uplo, const Tensor& w, const Tensor* v,
                     const char* op) {
  TENSORD_ASSERT(uplo == 'L' || uplo == 'U');
  switch (a.dtype()) {
    case DType::kFloat32:
      return eigh_typed<float>(ctx, a, uplo, w, v, op);
    case DType::kFloat64:
      return eigh_typed<double>(ctx, a, uplo, w, v, op);
    case DType::kComplex64:
      return eigh_typed<std::complex<float>>(ctx, a, uplo, w, v, op);
    case DType::kComplex128:
      return eigh_typed<std::complex<double>>(ctx, a, uplo, w, v, op);
    default:
      throw Error(ErrorCode::kDtypeMismatch,
                  std::string(op) + ": not implemented for dtype " + std::string(dtype_name(a.dtype())));
  }
}

}  // namespace tensord
