// matmul, linalg.eigh, linalg.eigvalsh.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <random>

#include "ops/convert.h"
#include "op_call_util_shape.h"

namespace tensord::shape_test {
namespace {

using Cd = std::complex<double>;

// A tensor of `shape` with random values: small integers for integer dtypes,
// uniform [-1, 1) (both parts for complex) for floating ones.
Tensor random_tensor(DType t, Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> si(t == DType::kUInt8 ? 0 : -5, 5);
  Tensor x = Tensor::empty_host(t, std::move(shape));
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (is_integral(t, false)) {
      store_from_double(t, x.data(), i, si(rng));
    } else {
      const double re = u(rng);
      const double im = u(rng);
      store_from_complex(t, x.data(), i, Cd(re, is_complex(t) ? im : 0.0));
    }
  }
  return x;
}

std::vector<Cd> as_complex(const Tensor& t) {
  std::vector<Cd> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = load_as_complex(t.dtype(), t.data(), i);
  return v;
}

// torch.matmul by its definition, in complex double. Returns the result and
// sum_k |a||b| per element (the scale of the rounding error).
std::pair<std::vector<Cd>, std::vector<double>> matmul_ref(const Tensor& a, const Tensor& b, const Shape& out) {
  Shape as = a.shape(), bs = b.shape();
  const bool av = as.size() == 1, bv = bs.size() == 1;
  if (av) as.insert(as.begin(), 1);
  if (bv) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const size_t rb = std::max(as.size(), bs.size()) - 2;
  Shape batch(rb);
  Shape pa(rb, 1), pb(rb, 1);
  for (size_t i = 0; i < as.size() - 2; ++i) pa[rb - (as.size() - 2) + i] = as[i];
  for (size_t i = 0; i < bs.size() - 2; ++i) pb[rb - (bs.size() - 2) + i] = bs[i];
  for (size_t i = 0; i < rb; ++i) batch[i] = std::max(pa[i], pb[i]);
  const auto A = as_complex(a), B = as_complex(b);
  const int64_t nb = shape_numel(batch);
  std::vector<Cd> c(static_cast<size_t>(nb * m * n));
  std::vector<double> scale(c.size());
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t rem = bi, ao = 0, bo = 0, sa = m * k, sb = k * n;
    for (size_t d = rb; d-- > 0;) {
      const int64_t i = rem % batch[d];
      rem /= batch[d];
      ao += (pa[d] == 1 ? 0 : i) * sa;
      bo += (pb[d] == 1 ? 0 : i) * sb;
      sa *= pa[d];
      sb *= pb[d];
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        Cd s = 0;
        double sc = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          const Cd x = A[static_cast<size_t>(ao + i * k + kk)], y = B[static_cast<size_t>(bo + kk * n + j)];
          s += x * y;
          sc += std::abs(x) * std::abs(y);
        }
        c[static_cast<size_t>((bi * m + i) * n + j)] = s;
        scale[static_cast<size_t>((bi * m + i) * n + j)] = sc;
      }
    }
  }
  EXPECT_EQ(static_cast<int64_t>(c.size()), shape_numel(out));
  return {c, scale};
}

double matmul_tol(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kComplex64:
      return 1e-5;
    case DType::kFloat64:
    case DType::kComplex128:
      return 1e-13;
    case DType::kFloat16:
      return 2e-3;
    case DType::kBFloat16:
      return 1.6e-2;
    default:
      return 0;  // integers: exact
  }
}

void check_matmul(DType t, const Shape& as, const Shape& bs, const Shape& want, ThreadPool* pool = nullptr) {
  SCOPED_TRACE(std::string(dtype_name(t)) + " " + shape_str(as) + " @ " + shape_str(bs));
  Tensor a = random_tensor(t, as, 1);
  Tensor b = random_tensor(t, bs, 2);
  Tensor c = run1("matmul", {a, b}, {}, pool);
  ASSERT_EQ(c.shape(), want);
  ASSERT_EQ(c.dtype(), t);
  auto [ref, scale] = matmul_ref(a, b, want);
  const auto got = as_complex(c);
  const double tol = matmul_tol(t);
  for (size_t i = 0; i < got.size(); ++i) {
    if (tol == 0) {
      ASSERT_EQ(got[i], ref[i]) << "element " << i;
    } else {
      ASSERT_LE(std::abs(got[i] - ref[i]), tol * (scale[i] + 1e-30)) << "element " << i;
    }
  }
}

const DType kMatmulDtypes[] = {DType::kFloat32, DType::kFloat64,  DType::kComplex64, DType::kComplex128,
                               DType::kFloat16, DType::kBFloat16, DType::kInt64,     DType::kInt32,
                               DType::kInt16,   DType::kInt8,     DType::kUInt8};

TEST(LinalgMatmul, ShapesAndValuesAllDtypes) {
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {
      {{3}, {3}, {}},                           // dot
      {{2, 3}, {3}, {2}},                       // matrix-vector
      {{3}, {3, 4}, {4}},                       // vector-matrix
      {{2, 3}, {3, 4}, {2, 4}},                 // mm
      {{5, 2, 3}, {3, 4}, {5, 2, 4}},           // batch folds into rows
      {{3}, {5, 3, 4}, {5, 4}},                 // 1-D left, batched right
      {{5, 2, 3}, {3}, {5, 2}},                 // batched left, 1-D right
      {{2, 1, 4, 3}, {5, 3, 2}, {2, 5, 4, 2}},  // broadcast batch dims
      {{1, 4, 3}, {6, 3, 2}, {6, 4, 2}},        // broadcast a size-1 batch
      {{6, 4, 3}, {1, 3, 2}, {6, 4, 2}},
      {{0, 3}, {3, 2}, {0, 2}},  // empty
      {{2, 0}, {0, 3}, {2, 3}},  // empty sum -> zeros
      {{0}, {0}, {}},
  };
  for (DType t : kMatmulDtypes) {
    for (const auto& c : cases) check_matmul(t, c.a, c.b, c.out);
  }
}

TEST(LinalgMatmul, LargeTiledParallel) {
  ThreadPool pool(4);
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kComplex64, DType::kInt32, DType::kBFloat16}) {
    check_matmul(t, {1, 200, 64}, {1, 64, 300}, {1, 200, 300}, &pool);  // one product split into tiles
    check_matmul(t, {3, 70, 50}, {50, 90}, {3, 70, 90}, &pool);         // folded rows, split
    check_matmul(t, {2, 3, 40, 30}, {3, 30, 20}, {2, 3, 40, 20}, &pool);
    check_matmul(t, {4, 300}, {300, 700}, {4, 700}, &pool);  // few rows: columns split
  }
}

TEST(LinalgMatmul, IntegerWrapsLikeTorch) {
  Tensor a = make<int8_t>(DType::kInt8, {1, 2}, {100, 100});
  Tensor b = make<int8_t>(DType::kInt8, {2, 1}, {2, 1});
  EXPECT_EQ(values<int8_t>(run1("matmul", {a, b}))[0], static_cast<int8_t>(300 - 256));
  Tensor c = i64({2}, {int64_t{1} << 62, int64_t{1} << 62});
  Tensor d = i64({2}, {2, 2});
  EXPECT_EQ(values<int64_t>(run1("matmul", {c, d}))[0], 0);  // 2^64 wraps to 0
}

TEST(LinalgMatmul, Errors) {
  auto f = [](Shape s) { return random_tensor(DType::kFloat32, std::move(s), 3); };
  EXPECT_EQ(error_of("matmul", {f({2, 3}), f({4, 5})}), ErrorCode::kShapeMismatch);
  EXPECT_EQ(error_of("matmul", {f({3}), f({4})}), ErrorCode::kShapeMismatch);
  EXPECT_EQ(error_of("matmul", {f({2, 2, 3}), f({3, 3, 4})}), ErrorCode::kShapeMismatch);
  EXPECT_EQ(error_of("matmul", {f({}), f({3})}), ErrorCode::kShapeMismatch);
  EXPECT_EQ(error_of("matmul", {f({3}), f({})}), ErrorCode::kShapeMismatch);
  EXPECT_EQ(error_of("matmul", {f({2, 3}), random_tensor(DType::kFloat64, {3, 2}, 1)}), ErrorCode::kDtypeMismatch);
  EXPECT_EQ(error_of("matmul", {make<uint8_t>(DType::kBool, {1, 1}, {1}), make<uint8_t>(DType::kBool, {1, 1}, {1})}),
            ErrorCode::kDtypeMismatch);
  try {
    call_op("matmul", {f({2, 3}), f({4, 5})});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.message().rfind("matmul: ", 0), 0u) << e.message();
  }
}

// ---- eigh ----

// A batch of Hermitian matrices whose `uplo` triangle holds the matrix and
// whose other triangle holds large garbage (which must be ignored). Returns
// the input and the full Hermitian matrices in complex double.
std::pair<Tensor, std::vector<Cd>> hermitian_input(DType t, const Shape& shape, char uplo, uint32_t seed) {
  Tensor x = random_tensor(t, shape, seed);
  const int64_t n = shape.back();
  const int64_t nn = n * n, batch = n == 0 ? 0 : x.numel() / nn;
  std::mt19937 rng(seed + 1000);
  std::uniform_real_distribution<double> g(-1e3, 1e3);
  std::vector<Cd> full(static_cast<size_t>(x.numel()));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const int64_t idx = b * nn + i * n + j;
        const bool in_triangle = uplo == 'L' ? j <= i : j >= i;
        if (i == j && is_complex(t)) {  // a Hermitian diagonal is real
          store_from_complex(t, x.data(), idx, Cd(load_as_complex(t, x.data(), idx).real(), 0));
        }
        if (!in_triangle) store_from_complex(t, x.data(), idx, Cd(g(rng), is_complex(t) ? g(rng) : 0.0));
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const bool in_triangle = uplo == 'L' ? j <= i : j >= i;
        const Cd v = in_triangle ? load_as_complex(t, x.data(), b * nn + i * n + j)
                                 : std::conj(load_as_complex(t, x.data(), b * nn + j * n + i));
        full[static_cast<size_t>(b * nn + i * n + j)] = v;
      }
    }
  }
  return {x, full};
}

void check_eigh(DType t, const Shape& shape, char uplo, ThreadPool* pool = nullptr) {
  SCOPED_TRACE(std::string(dtype_name(t)) + " " + shape_str(shape) + " UPLO=" + uplo);
  auto [x, full] = hermitian_input(t, shape, uplo, 7);
  OpCall c = call_op("linalg.eigh", {x, Attr(std::string(1, uplo))}, {}, pool);
  ASSERT_EQ(c.outs.size(), 2u);
  const Tensor& w = c.outs[0];
  const Tensor& v = c.outs[1];
  ASSERT_EQ(w.dtype(), to_real(t));
  ASSERT_EQ(v.dtype(), t);
  ASSERT_EQ(w.shape(), Shape(shape.begin(), shape.end() - 1));
  ASSERT_EQ(v.shape(), shape);
  const int64_t n = shape.back();
  if (n == 0 || x.numel() == 0) return;
  const bool single = t == DType::kFloat32 || t == DType::kComplex64;
  const double tol = single ? 1e-5 : 1e-12;
  const auto W = as_complex(w), V = as_complex(v);
  const int64_t batch = x.numel() / (n * n);
  for (int64_t b = 0; b < batch; ++b) {
    const Cd* A = &full[static_cast<size_t>(b * n * n)];
    const Cd* Vb = &V[static_cast<size_t>(b * n * n)];
    const Cd* Wb = &W[static_cast<size_t>(b * n)];
    double a_norm = 0, res = 0, orth = 0;
    for (int64_t i = 0; i < n * n; ++i) a_norm += std::norm(A[i]);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        Cd av = 0, vhv = 0;
        for (int64_t k = 0; k < n; ++k) {
          av += A[i * n + k] * Vb[k * n + j];
          vhv += std::conj(Vb[k * n + i]) * Vb[k * n + j];
        }
        res += std::norm(av - Vb[i * n + j] * Wb[j]);
        orth += std::norm(vhv - Cd(i == j ? 1.0 : 0.0));
      }
    }
    EXPECT_LT(std::sqrt(res) / std::max(std::sqrt(a_norm), 1e-300), tol) << "matrix " << b;
    EXPECT_LT(std::sqrt(orth), single ? 1e-5 * static_cast<double>(n) : 1e-13 * static_cast<double>(n))
        << "matrix " << b;
    for (int64_t i = 0; i + 1 < n; ++i) EXPECT_LE(Wb[i].real(), Wb[i + 1].real()) << "matrix " << b;
  }
  // eigvalsh gives the same eigenvalues.
  Tensor w2 = run1("linalg.eigvalsh", {x, Attr(std::string(1, uplo))}, {}, pool);
  ASSERT_EQ(w2.shape(), w.shape());
  const auto W2 = as_complex(w2);
  for (size_t i = 0; i < W.size(); ++i) EXPECT_NEAR(W2[i].real(), W[i].real(), single ? 1e-4 : 1e-10);
}

const DType kEighDtypes[] = {DType::kFloat32, DType::kFloat64, DType::kComplex64, DType::kComplex128};

TEST(LinalgEigh, ResidualOrthonormalAscendingAllDtypes) {
  for (DType t : kEighDtypes) {
    for (char uplo : {'L', 'U'}) {
      check_eigh(t, {2, 3, 5, 5}, uplo);
      check_eigh(t, {1, 1}, uplo);
      check_eigh(t, {2, 1, 1}, uplo);
      check_eigh(t, {33, 33}, uplo);
      check_eigh(t, {2, 0, 0}, uplo);
      check_eigh(t, {0, 4, 4}, uplo);
      check_eigh(t, {0, 0}, uplo);
    }
  }
}

TEST(LinalgEigh, ParallelBatchIsBitIdentical) {
  ThreadPool pool(4);
  for (DType t : kEighDtypes) {
    check_eigh(t, {40, 9, 9}, 'L', &pool);
    auto [x, full] = hermitian_input(t, {40, 9, 9}, 'U', 3);
    OpCall serial = call_op("linalg.eigh", {x, Attr("U")});
    OpCall par = call_op("linalg.eigh", {x, Attr("U")}, {}, &pool);
    for (size_t o = 0; o < 2; ++o) {
      ASSERT_EQ(serial.outs[o].nbytes(), par.outs[o].nbytes());
      EXPECT_EQ(std::memcmp(serial.outs[o].data(), par.outs[o].data(), serial.outs[o].nbytes()), 0);
    }
  }
}

TEST(LinalgEigh, KnownValues) {
  Tensor a = make<double>(DType::kFloat64, {2, 2}, {2, 1, 1, 2});
  OpCall c = call_op("linalg.eigh", {a});
  const auto w = values<double>(c.outs[0]);
  EXPECT_NEAR(w[0], 1.0, 1e-14);
  EXPECT_NEAR(w[1], 3.0, 1e-14);
  // Eigenvector of 3 is (1, 1) / sqrt(2): column 1 of V.
  const auto v = values<double>(c.outs[1]);
  EXPECT_NEAR(std::abs(v[1]), std::sqrt(0.5), 1e-14);
  EXPECT_NEAR(std::abs(v[3]), std::sqrt(0.5), 1e-14);
  EXPECT_NEAR(v[1] * v[3], 0.5, 1e-14);
  // Complex Hermitian [[2, -i], [i, 2]] (lower triangle holds i): eigenvalues 1 and 3,
  // with (1, i)/sqrt(2) for 3 -- checks the conjugation of the layout swap.
  using Cf = std::complex<double>;
  Tensor h = make<Cf>(DType::kComplex128, {2, 2}, {{2, 0}, {99, 99}, {0, 1}, {2, 0}});
  OpCall hc = call_op("linalg.eigh", {h, Attr("L")});
  const auto hw = values<double>(hc.outs[0]);
  EXPECT_NEAR(hw[0], 1.0, 1e-14);
  EXPECT_NEAR(hw[1], 3.0, 1e-14);
  const auto hv = values<Cf>(hc.outs[1]);
  // V[:, 1] is proportional to (1, i): V[1][1] / V[0][1] = i.
  const Cf ratio = hv[3] / hv[1];
  EXPECT_NEAR(ratio.real(), 0.0, 1e-13);
  EXPECT_NEAR(ratio.imag(), 1.0, 1e-13);
  // Lower-case UPLO is accepted, as in PyTorch.
  EXPECT_EQ(call_op("linalg.eigh", {a, Attr("u")}).outs.size(), 2u);
}

TEST(LinalgEigh, NonFiniteInputIsNumericalError) {
  for (DType t : kEighDtypes) {
    auto [x, full] = hermitian_input(t, {3, 4, 4}, 'L', 5);
    store_from_double(t, x.data(), 16 + 2 * 4 + 1, std::numeric_limits<double>::quiet_NaN());  // matrix 1, [2][1]
    EXPECT_EQ(error_of("linalg.eigh", {x}), ErrorCode::kNumericalError);
    EXPECT_EQ(error_of("linalg.eigvalsh", {x}), ErrorCode::kNumericalError);
    store_from_double(t, x.data(), 16 + 2 * 4 + 1, std::numeric_limits<double>::infinity());
    EXPECT_EQ(error_of("linalg.eigh", {x}), ErrorCode::kNumericalError);
    // A NaN in the ignored triangle is never read.
    auto [y, yfull] = hermitian_input(t, {2, 4, 4}, 'L', 6);
    store_from_double(t, y.data(), 1, std::numeric_limits<double>::quiet_NaN());  // [0][1], upper
    EXPECT_EQ(call_op("linalg.eigh", {y, Attr("L")}).outs.size(), 2u);
  }
}

TEST(LinalgEigh, CancelledStopsWork) {
  std::atomic<bool> cancelled{true};
  auto [x, full] = hermitian_input(DType::kFloat64, {4, 3, 3}, 'L', 1);
  try {
    call_op("linalg.eigh", {x}, {}, nullptr, &cancelled);
    FAIL() << "not cancelled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCancelled);
  }
  Tensor a = random_tensor(DType::kFloat32, {2, 3}, 1);
  try {
    call_op("matmul", {a, random_tensor(DType::kFloat32, {3, 2}, 2)}, {}, nullptr, &cancelled);
    FAIL() << "not cancelled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCancelled);
  }
}

TEST(LinalgEigh, Errors) {
  for (const char* op : {"linalg.eigh", "linalg.eigvalsh"}) {
    EXPECT_EQ(error_of(op, {random_tensor(DType::kFloat32, {3, 4}, 1)}), ErrorCode::kShapeMismatch);
    EXPECT_EQ(error_of(op, {random_tensor(DType::kFloat32, {2, 3, 4}, 1)}), ErrorCode::kShapeMismatch);
    EXPECT_EQ(error_of(op, {random_tensor(DType::kFloat32, {4}, 1)}), ErrorCode::kShapeMismatch);
    EXPECT_EQ(error_of(op, {random_tensor(DType::kFloat32, {}, 1)}), ErrorCode::kShapeMismatch);
    EXPECT_EQ(error_of(op, {random_tensor(DType::kInt64, {3, 3}, 1)}), ErrorCode::kDtypeMismatch);
    EXPECT_EQ(error_of(op, {random_tensor(DType::kFloat16, {3, 3}, 1)}), ErrorCode::kDtypeMismatch);
    EXPECT_EQ(error_of(op, {random_tensor(DType::kFloat32, {3, 3}, 1), Attr("X")}), ErrorCode::kInvalidArgument);
    EXPECT_EQ(error_of(op, {random_tensor(DType::kFloat32, {3, 3}, 1), Attr("LU")}), ErrorCode::kInvalidArgument);
  }
  const OpDef* eigh = OpRegistry::global().find("linalg.eigh");
  ASSERT_NE(eigh, nullptr);
  EXPECT_EQ(eigh->outputs, (std::vector<std::string>{"eigenvalues", "eigenvectors"}));
}

}  // namespace
}  // namespace tensord::shape_test
