// matmul on the CPU: float32/float64/complex64/complex128 through OpenBLAS
// gemm; float16/bfloat16 widened to float32 and rounded back (as PyTorch's
// CPU kernels compute them); integers by a plain loop with wrap-around
// arithmetic (PyTorch CPU supports integer matmul).
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <complex>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/cpu/linalg_kernels.h"
#include "ops/cpu/thread_pool.h"
#include "ops/dispatch.h"
#include "ops/error.h"
#include "ops/kernels/scalar_traits.h"
#include "ops/op_registry.h"

namespace tensord {

void set_blas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

MatmulPlan matmul_plan(const Shape& a, const Shape& b) {
  auto mismatch = [&](const std::string& why) -> Error {
    return Error(ErrorCode::kShapeMismatch, "matmul: shapes " + shape_str(a) + " and " + shape_str(b) + " " + why);
  };
  if (a.empty() || b.empty()) throw mismatch("cannot be multiplied: both arguments need to be at least 1-D");
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  Shape a2 = a_vec ? Shape{1, a[0]} : a;
  Shape b2 = b_vec ? Shape{b[0], 1} : b;
  MatmulPlan p;
  p.m = a2[a2.size() - 2];
  p.k = a2[a2.size() - 1];
  p.n = b2[b2.size() - 1];
  if (b2[b2.size() - 2] != p.k) {
    throw mismatch("cannot be multiplied (" + std::to_string(p.k) + " != " + std::to_string(b2[b2.size() - 2]) + ")");
  }
  p.a_batch.assign(a2.begin(), a2.end() - 2);
  p.b_batch.assign(b2.begin(), b2.end() - 2);
  const size_t rank = std::max(p.a_batch.size(), p.b_batch.size());
  p.batch.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    const size_t pa = rank - p.a_batch.size(), pb = rank - p.b_batch.size();
    const int64_t da = i < pa ? 1 : p.a_batch[i - pa];
    const int64_t db = i < pb ? 1 : p.b_batch[i - pb];
    if (da != db && da != 1 && db != 1) throw mismatch("have batch dims that are not broadcastable");
    p.batch[i] = da == 1 ? db : da;
  }
  p.out = p.batch;
  if (!a_vec) p.out.push_back(p.m);
  if (!b_vec) p.out.push_back(p.n);
  shape_numel(p.out);
  return p;
}

bool matmul_dtype_supported(DType t) {
  switch (t) {
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kComplex64:
    case DType::kComplex128:
      return true;
    default:
      return false;
  }
}

namespace {

// The work of one matmul, flattened: nb products C_i = A_i B_i of
// (m x k)(k x n), with A_i / B_i found through broadcast batch strides.
struct Geometry {
  int64_t nb = 1, m = 0, k = 0, n = 0;
  Shape batch;
  std::vector<int64_t> a_strides, b_strides;  // elements per batch dim (0 = broadcast)

  void offsets(int64_t bi, int64_t* ao, int64_t* bo) const {
    int64_t a = 0, b = 0;
    for (size_t d = batch.size(); d-- > 0;) {
      const int64_t i = bi % batch[d];
      bi /= batch[d];
      a += i * a_strides[d];
      b += i * b_strides[d];
    }
    *ao = a;
    *bo = b;
  }
};

std::vector<int64_t> batch_strides(const Shape& batch, const Shape& own, int64_t matrix) {
  std::vector<int64_t> st(batch.size(), 0);
  int64_t acc = matrix;
  for (size_t j = own.size(); j-- > 0;) {
    const size_t d = batch.size() - own.size() + j;
    st[d] = own[j] == 1 ? 0 : acc;
    acc *= own[j];
  }
  return st;
}

Geometry geometry_of(const MatmulPlan& p) {
  Geometry g;
  g.m = p.m;
  g.k = p.k;
  g.n = p.n;
  g.batch = p.batch;
  g.nb = shape_numel(p.batch);
  g.a_strides = batch_strides(p.batch, p.a_batch, p.m * p.k);
  g.b_strides = batch_strides(p.batch, p.b_batch, p.k * p.n);
  // One shared right operand and a left operand that is not broadcast: the
  // batch folds into the rows of a single product (x @ W for a linear layer).
  if (g.nb > 1 && shape_numel(p.b_batch) == 1 && shape_numel(p.a_batch) == g.nb) {
    g.m *= g.nb;
    g.nb = 1;
    g.batch.clear();
    g.a_strides.clear();
    g.b_strides.clear();
  }
  return g;
}

// Splits the products into tasks (batch item x row tile x column tile) so a
// pool of `threads` has about four tasks each, with tiles no thinner than
// 32 rows / 64 columns, and runs fn(bi, r0, r1, c0, c1) over them.
void run_tiles(const OpContext& ctx, const Geometry& g,
               const std::function<void(int64_t, int64_t, int64_t, int64_t, int64_t)>& fn) {
  const int64_t threads = ctx.pool ? ctx.pool->size() : 1;
  int64_t rb = g.m, cb = g.n;
  const double flops =
      static_cast<double>(g.nb) * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
  if (threads > 1 && flops > 262144.0 && g.nb < 4 * threads) {
    const int64_t want = (4 * threads + g.nb - 1) / g.nb;  // tiles per product
    const int64_t row_tiles = std::clamp<int64_t>(g.m / 32, 1, want);
    rb = (g.m + row_tiles - 1) / row_tiles;
    const int64_t col_tiles = std::clamp<int64_t>(g.n / 64, 1, (want + row_tiles - 1) / row_tiles);
    cb = (g.n + col_tiles - 1) / col_tiles;
  }
  rb = std::min<int64_t>(rb, INT_MAX);  // BLAS takes int sizes
  const int64_t row_tiles = (g.m + rb - 1) / rb;
  const int64_t col_tiles = (g.n + cb - 1) / cb;
  const int64_t per_product = row_tiles * col_tiles;
  const double task_flops = static_cast<double>(rb) * static_cast<double>(cb) * static_cast<double>(g.k);
  const int64_t grain = task_flops >= 65536.0 ? 1 : static_cast<int64_t>(65536.0 / std::max(task_flops, 1.0));
  ctx.parallel_for(g.nb * per_product, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      if (ctx.cancelled && ctx.cancelled->load(std::memory_order_relaxed)) {
        throw Error(ErrorCode::kCancelled, "matmul: cancelled");
      }
      const int64_t bi = t / per_product;
      const int64_t tile = t % per_product;
      const int64_t r0 = (tile / col_tiles) * rb, c0 = (tile % col_tiles) * cb;
      fn(bi, r0, std::min(g.m, r0 + rb), c0, std::min(g.n, c0 + cb));
    }
  });
}

void gemm(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}
void gemm(int m, int n, int k, const double* a, int lda, const double* b, int ldb, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}
void gemm(int m, int n, int k, const std::complex<float>* a, int lda, const std::complex<float>* b, int ldb,
          std::complex<float>* c, int ldc) {
  const std::complex<float> one(1.0f, 0.0f), zero(0.0f, 0.0f);
  cblas_cgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
}
void gemm(int m, int n, int k, const std::complex<double>* a, int lda, const std::complex<double>* b, int ldb,
          std::complex<double>* c, int ldc) {
  const std::complex<double> one(1.0, 0.0), zero(0.0, 0.0);
  cblas_zgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
}

template <class T>
void matmul_blas(const OpContext& ctx, const Geometry& g, const T* a, const T* b, T* c) {
  if (g.k > INT_MAX || g.n > INT_MAX) {
    throw Error(ErrorCode::kInvalidArgument, "matmul: inner or column dimension over 2^31 - 1 is not supported");
  }
  const int k = static_cast<int>(g.k), n = static_cast<int>(g.n);
  run_tiles(ctx, g, [&](int64_t bi, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    int64_t ao, bo;
    g.offsets(bi, &ao, &bo);
    gemm(static_cast<int>(r1 - r0), static_cast<int>(c1 - c0), k, a + ao + r0 * g.k, k, b + bo + c0, n,
         c + bi * g.m * g.n + r0 * g.n + c0, n);
  });
}

// Integer product: accumulates in uint64 (wrapping, no UB) and truncates, so
// the result is the exact product modulo 2^bits as PyTorch's wrapping kernel.
template <class T>
void matmul_int(const OpContext& ctx, const Geometry& g, const T* a, const T* b, T* c) {
  run_tiles(ctx, g, [&](int64_t bi, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    int64_t ao, bo;
    g.offsets(bi, &ao, &bo);
    thread_local std::vector<uint64_t> acc;
    acc.assign(static_cast<size_t>(c1 - c0), 0);
    for (int64_t i = r0; i < r1; ++i) {
      std::fill(acc.begin(), acc.end(), 0);
      const T* arow = a + ao + i * g.k;
      for (int64_t kk = 0; kk < g.k; ++kk) {
        const auto av = static_cast<uint64_t>(static_cast<int64_t>(arow[kk]));
        if (av == 0) continue;
        const T* brow = b + bo + kk * g.n + c0;
        for (int64_t j = 0; j < c1 - c0; ++j) {
          acc[static_cast<size_t>(j)] += av * static_cast<uint64_t>(static_cast<int64_t>(brow[j]));
        }
      }
      T* crow = c + bi * g.m * g.n + i * g.n + c0;
      for (int64_t j = 0; j < c1 - c0; ++j) crow[j] = static_cast<T>(acc[static_cast<size_t>(j)]);
    }
  });
}

template <class T>
std::vector<float> widen(const OpContext& ctx, const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  const T* src = t.data_ptr<T>();
  ctx.parallel_for(t.numel(), 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[static_cast<size_t>(i)] = kernels::ScalarTraits<T>::load(src[i]);
  });
  return out;
}

}  // namespace

Tensor matmul_cpu(const OpContext& ctx, const Tensor& a, const Tensor& b) {
  const MatmulPlan p = matmul_plan(a.shape(), b.shape());
  Tensor out = ctx.empty(a.dtype(), p.out);
  if (out.numel() == 0) return out;
  if (p.k == 0) {  // empty sums
    std::memset(out.data(), 0, out.nbytes());
    return out;
  }
  const Geometry g = geometry_of(p);
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::complex<float>> ||
                  std::is_same_v<T, std::complex<double>>) {
      matmul_blas<T>(ctx, g, a.data_ptr<T>(), b.data_ptr<T>(), out.data_ptr<T>());
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      const std::vector<float> af = widen<T>(ctx, a), bf = widen<T>(ctx, b);
      std::vector<float> cf(static_cast<size_t>(out.numel()));
      matmul_blas<float>(ctx, g, af.data(), bf.data(), cf.data());
      T* dst = out.data_ptr<T>();
      ctx.parallel_for(out.numel(), 1 << 16, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) dst[i] = kernels::ScalarTraits<T>::store(cf[static_cast<size_t>(i)]);
      });
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      matmul_int<T>(ctx, g, a.data_ptr<T>(), b.data_ptr<T>(), out.data_ptr<T>());
    } else {
      throw Error(ErrorCode::kDtypeMismatch, "matmul: not implemented for dtype " + std::string(dtype_name(a.dtype())));
    }
  });
  return out;
}

}  // namespace tensord
