// linalg.eigh's CPU paths, each forced (eigh_cpu's EighPath), so every path
// is tested whatever the measured crossover picks: LAPACK, and the batched
// Jacobi solver for each ISA this CPU runs (portable, AVX2, AVX-512). The
// same cases for all: random, repeated eigenvalues, diagonal, zero, n = 1,
// partial SIMD groups, large n, batch shapes, both UPLO, all four dtypes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/convert.h"
#include "ops/cpu/linalg_kernels.h"
#include "ops/cpu/thread_pool.h"
#include "ops/error.h"
#include "ops/op_registry.h"
#include "ops/tensor.h"

namespace tensord {
namespace {

using Cd = std::complex<double>;

// kOnes: all ones (eigenvalue n once, 0 n-1 times); kWilkinson: the
// tridiagonal W_n^+ (pairs of eigenvalues equal to many digits); kGraded:
// random entries scaled by 2^-(i+j) (a range of 2^-2n); kSplit: random
// 5 x 5 diagonal blocks (QL deflates at exact zeros).
enum class Kind { kRandom, kRepeated, kDiagonal, kZero, kOnes, kWilkinson, kGraded, kSplit };

const char* path_name(EighPath p) {
  switch (p) {
    case EighPath::kLapack:
      return "lapack";
    case EighPath::kJacobiPortable:
      return "portable";
    case EighPath::kJacobiAvx2:
      return "avx2";
    case EighPath::kJacobiAvx512:
      return "avx512";
    case EighPath::kTridiagPortable:
      return "tridiag_portable";
    case EighPath::kTridiagAvx2:
      return "tridiag_avx2";
    case EighPath::kTridiagAvx512:
      return "tridiag_avx512";
    default:
      return "auto";
  }
}

// Full Hermitian matrices (complex double, row-major) of the given kind.
std::vector<Cd> make_full(Kind kind, bool cplx, int64_t batch, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<Cd> a(static_cast<size_t>(batch * n * n));
  for (int64_t b = 0; b < batch; ++b) {
    Cd* m = &a[static_cast<size_t>(b * n * n)];
    if (kind == Kind::kZero) continue;
    if (kind == Kind::kOnes || kind == Kind::kWilkinson) {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          if (kind == Kind::kOnes) m[i * n + j] = 1.0;
          if (kind == Kind::kWilkinson && i == j) m[i * n + j] = std::abs(static_cast<double>(i) - (n - 1) / 2.0);
          if (kind == Kind::kWilkinson && (i == j + 1 || j == i + 1)) m[i * n + j] = 1.0;
        }
      }
      continue;
    }
    if (kind == Kind::kGraded || kind == Kind::kSplit) {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j <= i; ++j) {
          if (kind == Kind::kSplit && i / 5 != j / 5) continue;
          const double g = kind == Kind::kGraded ? std::ldexp(1.0, -static_cast<int>(i + j)) : 1.0;
          const Cd x(u(rng) * g, cplx && i != j ? u(rng) * g : 0.0);
          m[i * n + j] = x;
          m[j * n + i] = std::conj(x);
        }
      }
      continue;
    }
    if (kind == Kind::kRandom || kind == Kind::kDiagonal) {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j <= i; ++j) {
          if (kind == Kind::kDiagonal && i != j) continue;
          const Cd x(u(rng), cplx && i != j ? u(rng) : 0.0);
          m[i * n + j] = x;
          m[j * n + i] = std::conj(x);
        }
      }
      continue;
    }
    // Repeated: Q diag(d) Q^H with d in {-1, 0.5, 2} (each several times)
    // and Q = I - 2 w w^H / |w|^2, a unitary reflector.
    std::vector<Cd> w(static_cast<size_t>(n));
    double wn = 0;
    for (auto& x : w) {
      x = Cd(u(rng), cplx ? u(rng) : 0.0);
      wn += std::norm(x);
    }
    const double d[3] = {-1.0, 0.5, 2.0};
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        Cd s = 0;
        for (int64_t k = 0; k < n; ++k) {
          const Cd qik =
              (i == k ? 1.0 : 0.0) - 2.0 * w[static_cast<size_t>(i)] * std::conj(w[static_cast<size_t>(k)]) / wn;
          const Cd qjk =
              (j == k ? 1.0 : 0.0) - 2.0 * w[static_cast<size_t>(j)] * std::conj(w[static_cast<size_t>(k)]) / wn;
          s += qik * d[k % 3] * std::conj(qjk);
        }
        m[i * n + j] = s;
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      m[i * n + i] = m[i * n + i].real();
      for (int64_t j = 0; j < i; ++j) m[j * n + i] = std::conj(m[i * n + j]);
    }
  }
  return a;
}

// The input tensor: the uplo triangle from `full`, large garbage elsewhere.
Tensor make_input(DType t, const Shape& shape, const std::vector<Cd>& full, char uplo) {
  Tensor x = Tensor::empty_host(t, shape);
  const int64_t n = shape.back();
  for (int64_t e = 0; e < x.numel(); ++e) {
    const int64_t i = (e / n) % n, j = e % n;
    const bool in = uplo == 'L' ? j <= i : j >= i;
    store_from_complex(t, x.data(), e, in ? full[static_cast<size_t>(e)] : Cd(1e3, is_complex(t) ? -7e2 : 0.0));
  }
  return x;
}

struct Result {
  Tensor w, v;
};

Result run_eigh(EighPath path, const Tensor& x, char uplo, ThreadPool* pool = nullptr, bool vectors = true,
                const std::atomic<bool>* cancelled = nullptr) {
  Shape ws(x.shape().begin(), x.shape().end() - 1);
  Result r{Tensor::empty_host(to_real(x.dtype()), ws), Tensor::empty_host(x.dtype(), x.shape())};
  OpContext ctx;
  ctx.pool = pool;
  ctx.cancelled = cancelled;
  eigh_cpu(ctx, x, uplo, r.w, vectors ? &r.v : nullptr, "linalg.eigh", path);
  return r;
}

// Residual, orthogonality, ascending order, and eigenvalues against the
// LAPACK path in float64 / complex128 on the same matrices.
void check(EighPath path, DType t, const Shape& shape, Kind kind, char uplo, ThreadPool* pool = nullptr) {
  SCOPED_TRACE(std::string(path_name(path)) + " " + std::string(dtype_name(t)) + " " + shape_str(shape) + " kind " +
               std::to_string(static_cast<int>(kind)) + " UPLO=" + uplo);
  const int64_t n = shape.back();
  const int64_t batch = shape_numel(shape) / (n * n);
  const auto full = make_full(kind, is_complex(t), batch, n, 11 + static_cast<uint32_t>(n));
  const Tensor x = make_input(t, shape, full, uplo);
  Result r;
  try {
    r = run_eigh(path, x, uplo, pool);
  } catch (const Error& e) {
    FAIL() << e.message();
  }
  const DType ref_t = is_complex(t) ? DType::kComplex128 : DType::kFloat64;
  const Result ref = run_eigh(EighPath::kLapack, make_input(ref_t, shape, full, uplo), uplo, nullptr, false);
  const bool single = t == DType::kFloat32 || t == DType::kComplex64;
  const double tol = single ? 2e-6 * std::max<double>(1, std::sqrt(static_cast<double>(n)))
                            : 1e-13 * std::max<double>(1, std::sqrt(static_cast<double>(n)));
  for (int64_t b = 0; b < batch; ++b) {
    const Cd* A = &full[static_cast<size_t>(b * n * n)];
    std::vector<Cd> V(static_cast<size_t>(n * n));
    std::vector<double> W(static_cast<size_t>(n)), Wref(static_cast<size_t>(n));
    for (int64_t i = 0; i < n * n; ++i) V[static_cast<size_t>(i)] = load_as_complex(t, r.v.data(), b * n * n + i);
    for (int64_t i = 0; i < n; ++i) {
      W[static_cast<size_t>(i)] = load_as_complex(to_real(t), r.w.data(), b * n + i).real();
      Wref[static_cast<size_t>(i)] = load_as_complex(DType::kFloat64, ref.w.data(), b * n + i).real();
    }
    double a_norm = 0, res = 0, orth = 0;
    for (int64_t i = 0; i < n * n; ++i) a_norm += std::norm(A[i]);
    a_norm = std::sqrt(a_norm);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        Cd av = 0, vhv = 0;
        for (int64_t k = 0; k < n; ++k) {
          av += A[i * n + k] * V[static_cast<size_t>(k * n + j)];
          vhv += std::conj(V[static_cast<size_t>(k * n + i)]) * V[static_cast<size_t>(k * n + j)];
        }
        res += std::norm(av - V[static_cast<size_t>(i * n + j)] * W[static_cast<size_t>(j)]);
        orth += std::norm(vhv - Cd(i == j ? 1.0 : 0.0));
      }
    }
    ASSERT_LE(std::sqrt(res), tol * std::max(a_norm, 1e-300)) << "residual, matrix " << b;
    // Jacobi accumulates one rounding per rotation in V: float32 gets the
    // looser bound of LinalgEigh's suite (1e-5 n in Frobenius norm).
    ASSERT_LE(std::sqrt(orth), single ? 1e-5 * static_cast<double>(n) : tol) << "orthogonality, matrix " << b;
    for (int64_t i = 0; i < n; ++i) {
      if (i + 1 < n) {
        ASSERT_LE(W[static_cast<size_t>(i)], W[static_cast<size_t>(i + 1)]) << "order, matrix " << b;
      }
      ASSERT_NEAR(W[static_cast<size_t>(i)], Wref[static_cast<size_t>(i)], tol * std::max(a_norm, 1.0))
          << "eigenvalue " << i << ", matrix " << b;
    }
  }
  // Eigenvalues alone (eigvalsh): the same numbers from Jacobi (the same
  // rotations run), the same to rounding from LAPACK (another algorithm).
  const Result wo = run_eigh(path, x, uplo, pool, false);
  if (path != EighPath::kLapack) {
    ASSERT_EQ(std::memcmp(wo.w.data(), r.w.data(), r.w.nbytes()), 0);
  } else {
    for (int64_t i = 0; i < r.w.numel(); ++i) {
      ASSERT_NEAR(load_as_complex(r.w.dtype(), wo.w.data(), i).real(),
                  load_as_complex(r.w.dtype(), r.w.data(), i).real(), single ? 1e-4 : 1e-10);
    }
  }
}

const DType kDtypes[] = {DType::kFloat32, DType::kFloat64, DType::kComplex64, DType::kComplex128};

class EighPathTest : public ::testing::TestWithParam<EighPath> {
 protected:
  void SetUp() override {
    if (!eigh_path_available(GetParam())) GTEST_SKIP() << path_name(GetParam()) << " is not supported by this CPU";
  }
  bool jacobi() const { return GetParam() != EighPath::kLapack; }
  bool tridiag() const {
    const EighPath p = GetParam();
    return p == EighPath::kTridiagPortable || p == EighPath::kTridiagAvx2 || p == EighPath::kTridiagAvx512;
  }
};

TEST_P(EighPathTest, AllKindsDtypesUplo) {
  for (DType t : kDtypes) {
    for (char uplo : {'L', 'U'}) {
      check(GetParam(), t, {2, 3, 6, 6}, Kind::kRandom, uplo);
      check(GetParam(), t, {5, 9, 9}, Kind::kRepeated, uplo);
      check(GetParam(), t, {3, 7, 7}, Kind::kDiagonal, uplo);
      check(GetParam(), t, {4, 5, 5}, Kind::kZero, uplo);
      check(GetParam(), t, {3, 1, 1}, Kind::kRandom, uplo);
      check(GetParam(), t, {1, 1}, Kind::kRandom, uplo);
      check(GetParam(), t, {2, 2}, Kind::kRepeated, uplo);
    }
  }
}

TEST_P(EighPathTest, PartialGroupsAndSizes) {
  ThreadPool pool(3);
  for (DType t : kDtypes) {
    check(GetParam(), t, {19, 16, 16}, Kind::kRandom, 'L', &pool);  // 16 + 3: a partial SIMD group
    check(GetParam(), t, {2, 3, 32, 32}, Kind::kRandom, 'U', &pool);
    check(GetParam(), t, {3, 33, 33}, Kind::kRepeated, 'L', &pool);
  }
}

TEST_P(EighPathTest, LargeN) {
  ThreadPool pool(2);
  // Jacobi goes up to n = 128 (complex on a tridiagonal path is Jacobi),
  // the tridiagonal QL to 256, LAPACK takes anything.
  const int64_t n = jacobi() ? 128 : 300;
  const int64_t n_real = tridiag() ? 256 : n;
  check(GetParam(), DType::kFloat32, {2, n_real, n_real}, Kind::kRandom, 'L', &pool);
  check(GetParam(), DType::kFloat64, {1, n_real, n_real}, Kind::kRandom, 'U', &pool);
  check(GetParam(), DType::kComplex64, {1, n, n}, Kind::kRepeated, 'L', &pool);
  check(GetParam(), DType::kComplex128, {1, n, n}, Kind::kRandom, 'L', &pool);
}

TEST_P(EighPathTest, HardMatrices) {
  ThreadPool pool(2);
  for (DType t : kDtypes) {
    for (Kind kind : {Kind::kOnes, Kind::kWilkinson, Kind::kGraded, Kind::kSplit}) {
      check(GetParam(), t, {3, 21, 21}, kind, 'L', &pool);
      check(GetParam(), t, {2, 64, 64}, kind, 'U', &pool);
    }
  }
}

TEST_P(EighPathTest, TridiagRangeSizes) {
  // The n where the automatic choice takes the tridiagonal QL (17 .. 64),
  // with 21 matrices: no SIMD width (2, 4, 8, 16) divides it, so every path
  // has a partial last group.
  ThreadPool pool(2);
  for (int64_t n : {17, 32, 33, 48, 64}) {
    for (DType t : {DType::kFloat32, DType::kFloat64}) {
      check(GetParam(), t, {21, n, n}, Kind::kRandom, n % 2 ? 'L' : 'U', &pool);
      check(GetParam(), t, {3, 7, n, n}, Kind::kRepeated, n % 2 ? 'U' : 'L', &pool);
    }
  }
  for (DType t : {DType::kComplex64, DType::kComplex128}) check(GetParam(), t, {5, 33, 33}, Kind::kRandom, 'L', &pool);
  check(GetParam(), DType::kFloat32, {9, 48, 48}, Kind::kDiagonal, 'L', &pool);
  check(GetParam(), DType::kFloat64, {9, 33, 33}, Kind::kZero, 'U', &pool);
}

TEST_P(EighPathTest, ScaleInvariantTinyAndHuge) {
  // Entries near the float range's ends: the power-of-two prescaling keeps
  // d^2 + 4 a_pq^2 finite and small matrices accurate.
  for (double s : {1e-30, 1e30}) {
    SCOPED_TRACE(s);
    auto full = make_full(Kind::kRandom, false, 4, 6, 3);
    for (auto& x : full) x *= s;
    const Tensor x = make_input(DType::kFloat32, {4, 6, 6}, full, 'L');
    const Result r = run_eigh(GetParam(), x, 'L');
    auto ref_full = make_full(Kind::kRandom, false, 4, 6, 3);
    const Result ref = run_eigh(EighPath::kLapack, make_input(DType::kFloat64, {4, 6, 6}, ref_full, 'L'), 'L');
    for (int64_t i = 0; i < 24; ++i) {
      const double got = r.w.data_ptr<float>()[i] / s;
      ASSERT_NEAR(got, ref.w.data_ptr<double>()[i], 1e-5) << i;
    }
  }
}

TEST_P(EighPathTest, NonFiniteIsNumericalErrorNamingTheMatrix) {
  for (DType t : kDtypes) {
    for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
      auto full = make_full(Kind::kRandom, is_complex(t), 20, 4, 5);
      Tensor x = make_input(t, {20, 4, 4}, full, 'L');
      store_from_double(t, x.data(), 17 * 16 + 2 * 4 + 1, bad);  // matrix 17, [2][1]
      try {
        run_eigh(GetParam(), x, 'L');
        FAIL() << "no error";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kNumericalError);
        EXPECT_NE(e.message().find("matrix 17"), std::string::npos) << e.message();
      }
      // Read only through the other triangle: UPLO=U ignores it.
      EXPECT_NO_THROW(run_eigh(GetParam(), x, 'U'));
    }
  }
}

TEST_P(EighPathTest, CancelledStopsWork) {
  std::atomic<bool> cancelled{true};
  const Tensor x = make_input(DType::kFloat32, {40, 8, 8}, make_full(Kind::kRandom, false, 40, 8, 1), 'L');
  try {
    run_eigh(GetParam(), x, 'L', nullptr, true, &cancelled);
    FAIL() << "not cancelled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCancelled);
  }
}

TEST_P(EighPathTest, ParallelEqualsSerialBitForBit) {
  ThreadPool pool(4);
  for (DType t : kDtypes) {
    const Tensor x = make_input(t, {70, 12, 12}, make_full(Kind::kRandom, is_complex(t), 70, 12, 9), 'U');
    const Result a = run_eigh(GetParam(), x, 'U');
    const Result b = run_eigh(GetParam(), x, 'U', &pool);
    ASSERT_EQ(std::memcmp(a.w.data(), b.w.data(), a.w.nbytes()), 0);
    ASSERT_EQ(std::memcmp(a.v.data(), b.v.data(), a.v.nbytes()), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, EighPathTest,
                         ::testing::Values(EighPath::kLapack, EighPath::kJacobiPortable, EighPath::kJacobiAvx2,
                                           EighPath::kJacobiAvx512, EighPath::kTridiagPortable, EighPath::kTridiagAvx2,
                                           EighPath::kTridiagAvx512),
                         [](const ::testing::TestParamInfo<EighPath>& i) { return std::string(path_name(i.param)); });

TEST(EighBatched, IsaPathsAgree) {
  // Every ISA computes the same rotations; results agree to rounding.
  const Tensor x = make_input(DType::kFloat64, {9, 10, 10}, make_full(Kind::kRandom, false, 9, 10, 4), 'L');
  const Result p = run_eigh(EighPath::kJacobiPortable, x, 'L');
  for (EighPath path : {EighPath::kJacobiAvx2, EighPath::kJacobiAvx512}) {
    if (!eigh_path_available(path)) continue;
    const Result r = run_eigh(path, x, 'L');
    for (int64_t i = 0; i < 90; ++i) EXPECT_NEAR(r.w.data_ptr<double>()[i], p.w.data_ptr<double>()[i], 1e-13);
  }
}

TEST(EighBatched, AutoPathChoice) {
  // Real: n < 6 goes to Jacobi, larger n to the tridiagonal QL, a single
  // matrix of n > 32 and n > 256 to LAPACK. Complex: Jacobi or LAPACK.
  EXPECT_EQ(eigh_auto_algorithm(DType::kFloat32, 4, 10000), EighAlgorithm::kJacobi);
  EXPECT_EQ(eigh_auto_algorithm(DType::kFloat64, 8, 100), EighAlgorithm::kTridiag);
  EXPECT_EQ(eigh_auto_algorithm(DType::kFloat32, 16, 10000), EighAlgorithm::kTridiag);
  EXPECT_EQ(eigh_auto_algorithm(DType::kFloat32, 64, 1), EighAlgorithm::kLapack);
  EXPECT_EQ(eigh_auto_algorithm(DType::kComplex64, 8, 10000), EighAlgorithm::kJacobi);
  EXPECT_EQ(eigh_auto_algorithm(DType::kFloat32, 32, 10000), EighAlgorithm::kTridiag);
  EXPECT_EQ(eigh_auto_algorithm(DType::kFloat64, 64, 1000), EighAlgorithm::kTridiag);
  EXPECT_EQ(eigh_auto_algorithm(DType::kComplex64, 32, 10000), EighAlgorithm::kJacobi);
  EXPECT_EQ(eigh_auto_algorithm(DType::kFloat32, 300, 2), EighAlgorithm::kLapack);
  EXPECT_EQ(eigh_auto_algorithm(DType::kFloat32, 256, 1), EighAlgorithm::kLapack);
  std::string isa = eigh_jacobi_isa_name();
  EXPECT_TRUE(isa == "portable" || isa == "avx2" || isa == "avx512") << isa;
}

TEST(EighBatched, TridiagLanesAreIndependent) {
  // Every lane of the tridiagonal QL computes what a one-matrix solve would:
  // a matrix alone and as lane 5 of a group of random matrices (which need
  // other numbers of iterations and other blocks) give the same numbers.
  for (DType t : {DType::kFloat32, DType::kFloat64}) {
    for (EighPath path : {EighPath::kTridiagPortable, EighPath::kTridiagAvx2, EighPath::kTridiagAvx512}) {
      if (!eigh_path_available(path)) continue;
      SCOPED_TRACE(path_name(path));
      const int64_t n = 40;
      const auto group = make_full(Kind::kRandom, false, 19, n, 21);
      const auto rep = make_full(Kind::kRepeated, false, 1, n, 22);
      std::vector<Cd> mixed = group;
      std::copy(rep.begin(), rep.end(), mixed.begin() + 5 * n * n);
      const Result alone = run_eigh(path, make_input(t, {1, n, n}, rep, 'L'), 'L');
      const Result in_group = run_eigh(path, make_input(t, {19, n, n}, mixed, 'L'), 'L');
      // Exactly equal values (an identity rotation of another lane's block
      // may turn a -0 into +0).
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(load_as_complex(t, alone.w.data(), i).real(),
                  load_as_complex(t, in_group.w.data(), 5 * n + i).real());
      }
      for (int64_t i = 0; i < n * n; ++i) {
        ASSERT_EQ(load_as_complex(t, alone.v.data(), i).real(),
                  load_as_complex(t, in_group.v.data(), 5 * n * n + i).real())
            << i;
      }
    }
  }
}

TEST(EighBatched, TridiagRejectsLargeN) {
  const Tensor x = Tensor::empty_host(DType::kFloat32, {257, 257});
  try {
    run_eigh(EighPath::kTridiagPortable, x, 'L');
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

TEST(EighBatched, JacobiRejectsLargeN) {
  const Tensor x = Tensor::empty_host(DType::kFloat32, {129, 129});
  try {
    run_eigh(EighPath::kJacobiPortable, x, 'L');
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace tensord
