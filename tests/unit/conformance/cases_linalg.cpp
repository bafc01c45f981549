// Linear algebra: matmul (dot, matrix-vector, batched with broadcast batch
// dims, empty) against a triple loop here; linalg.eigh and
// linalg.eigvalsh held to what defines an eigendecomposition (ascending
// eigenvalues, A V = V diag(w), V^H V = I, trace and Frobenius norm kept),
// reading only the UPLO triangle. Eigenvectors are unique up to a phase, so
// only eigenvalues are compared across backends.
#include <algorithm>
#include <cmath>
#include <string>

#include "ops/convert.h"
#include "tests/unit/conformance/variants.h"

namespace tensord::conformance {
namespace {

using ref::C;

Outcome matmul_ref(const Call& call, const Metas& m) {
  const Tensor& x = call.tensor("input");
  const Tensor& y = call.tensor("other");
  Shape xs = x.shape(), ys = y.shape();
  if (xs.size() == 1) xs.insert(xs.begin(), 1);
  if (ys.size() == 1) ys.push_back(1);
  const int64_t M = xs[xs.size() - 2], K = xs.back(), N = ys.back();
  const Shape xb(xs.begin(), xs.end() - 2), yb(ys.begin(), ys.end() - 2);
  Shape batch(std::max(xb.size(), yb.size()), 1);
  for (size_t k = 0; k < batch.size(); ++k) {
    const int64_t a = k < xb.size() ? xb[xb.size() - 1 - k] : 1, b = k < yb.size() ? yb[yb.size() - 1 - k] : 1;
    batch[batch.size() - 1 - k] = a == 1 ? b : a;
  }
  // Index of batch element `idx` in an operand's (right-aligned) batch dims.
  auto offset = [&](const Shape& ob, const std::vector<int64_t>& idx) {
    int64_t lin = 0, stride = 1;
    for (size_t k = 0; k < ob.size(); ++k) {
      const size_t d = ob.size() - 1 - k, dbatch = batch.size() - 1 - k;
      lin += (ob[d] == 1 ? 0 : idx[dbatch]) * stride;
      stride *= ob[d];
    }
    return lin;
  };
  Tensor r = Tensor::zeros_host(m[0].dtype, m[0].shape);
  const int64_t nb = shape_numel(batch);
  EXPECT_EQ(r.numel(), nb * M * N) << "matmul reference: output " << m[0].str();
  if (r.numel() != nb * M * N) return Outcome{{r}, {}};
  for (int64_t b = 0; b < nb; ++b) {
    const auto idx = ref::unravel(b, batch);
    const int64_t xo = offset(xb, idx) * M * K, yo = offset(yb, idx) * K * N;
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        C acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += ref::cvalue(x, xo + i * K + k) * ref::cvalue(y, yo + k * N + j);
        ref::store(r, (b * M + i) * N + j, acc);
      }
    }
  }
  return Outcome{{r}, {}};
}

void add_matmul(CaseTable& t) {
  OpCases& c = t.add("matmul", join({integer_dtypes(), standard_float_dtypes(), complex_dtypes()}));
  // Operands in [-1, 1]: the products' sum is what rounding is relative to.
  c.tolerance_ulps(128).reference(matmul_ref);
  const std::pair<Shape, Shape> shapes[] = {
      {{3, 4}, {4, 5}},          {{4}, {4}},       {{3, 4}, {4}},    {{4}, {4, 5}},    {{2, 3, 4}, {4, 5}},
      {{2, 1, 3, 4}, {3, 4, 2}}, {{3}, {2, 3, 4}}, {{3, 0}, {0, 2}}, {{0, 4}, {4, 2}}, {{1, 1}, {1, 1}}};
  for (const auto& [a, b] : shapes) {
    c.variant(shape_str(a) + " @ " + shape_str(b), [a = a, b = b](DType d, Rng& g) {
      return Call().arg("input", random_tensor(d, a, g, {-1, 1})).arg("other", random_tensor(d, b, g, {-1, 1}));
    });
  }
  c.variant("large",
            [](DType d, Rng& g) {
              return Call()
                  .arg("input", random_tensor(d, {64, 96}, g, {-1, 1}))
                  .arg("other", random_tensor(d, {96, 80}, g, {-1, 1}));
            },
            {DType::kFloat32, DType::kFloat64});
}

// A batch of Hermitian matrices of `shape` in dtype d; the triangle the op
// must not read (strictly upper for 'L', lower for 'U') holds junk.
Tensor hermitian(DType d, const Shape& shape, Rng& g, char uplo, bool repeated = false) {
  const int64_t n = shape.back();
  const int64_t batch = n ? shape_numel(shape) / (n * n) : 0;
  Tensor a = random_tensor(is_complex(d) ? DType::kComplex128 : DType::kFloat64, shape, g);
  Tensor h = Tensor::empty_host(d, shape);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const int64_t o = b * n * n;
        C v = (ref::cvalue(a, o + i * n + j) + std::conj(ref::cvalue(a, o + j * n + i))) / 2.0;
        if (repeated) v = i == j ? C(i < n / 2 ? 1.0 : 2.0) : C(0);
        if (i == j) v = v.real();
        const bool unread = uplo == 'L' ? j > i : j < i;
        if (unread) v = C(100.0 + static_cast<double>(i), -7.0);
        store_from_complex(d, h.data(), o + i * n + j, v);
      }
    }
  }
  return h;
}

// The Hermitian matrix the op sees: the UPLO triangle mirrored.
C seen(const Tensor& a, int64_t o, int64_t n, int64_t i, int64_t j, char uplo) {
  const bool stored = uplo == 'L' ? j <= i : j >= i;
  const C v = stored ? ref::cvalue(a, o + i * n + j) : std::conj(ref::cvalue(a, o + j * n + i));
  return i == j ? C(v.real()) : v;
}

std::string eigh_property(const Call& call, const Outcome& o, bool vectors) {
  const Tensor& a = call.tensor("A");
  const Attr& u = call.attr("UPLO");
  const char uplo = u.is_none() ? 'L' : static_cast<char>(std::toupper(u.to_string("UPLO")[0]));
  const int64_t n = a.shape().back();
  const int64_t batch = n ? a.numel() / (n * n) : 0;
  const Tensor& w = o.outs.at(0);
  const double eps = dtype_epsilon(a.dtype());
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t ao = b * n * n;
    double norm = 0, trace = 0, fro = 0, wsum = 0, wsq = 0;
    for (int64_t i = 0; i < n; ++i) {
      trace += seen(a, ao, n, i, i, uplo).real();
      for (int64_t j = 0; j < n; ++j) {
        const double s = std::norm(seen(a, ao, n, i, j, uplo));
        fro += s;
      }
    }
    norm = std::sqrt(fro);
    const double tol = 64 * static_cast<double>(n) * eps * (1 + norm);
    for (int64_t i = 0; i < n; ++i) {
      const double wi = ref::value(w, b * n + i);
      if (!std::isfinite(wi))
        return "matrix " + std::to_string(b) + ": eigenvalue " + std::to_string(i) + " not finite";
      if (i && wi < ref::value(w, b * n + i - 1) - tol)
        return "matrix " + std::to_string(b) + ": eigenvalues not ascending";
      wsum += wi;
      wsq += wi * wi;
    }
    if (std::abs(wsum - trace) > tol) {
      return "matrix " + std::to_string(b) + ": eigenvalues sum to " + std::to_string(wsum) + ", trace " +
             std::to_string(trace);
    }
    if (std::abs(wsq - fro) > tol * (1 + norm)) {
      return "matrix " + std::to_string(b) + ": squared eigenvalues sum to " + std::to_string(wsq) +
             ", squared Frobenius norm " + std::to_string(fro);
    }
    if (!vectors) continue;
    const Tensor& v = o.outs.at(1);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        C av = 0, vv = 0;  // (A V)[i][j] and (V^H V)[i][j]
        for (int64_t k = 0; k < n; ++k) {
          av += seen(a, ao, n, i, k, uplo) * ref::cvalue(v, ao + k * n + j);
          vv += std::conj(ref::cvalue(v, ao + k * n + i)) * ref::cvalue(v, ao + k * n + j);
        }
        const C vw = ref::cvalue(v, ao + i * n + j) * ref::value(w, b * n + j);
        if (std::abs(av - vw) > tol) {
          return "matrix " + std::to_string(b) + ": (A V - V diag(w))[" + std::to_string(i) + "][" + std::to_string(j) +
                 "] = " + std::to_string(std::abs(av - vw));
        }
        if (std::abs(vv - C(i == j ? 1.0 : 0.0)) > tol) {
          return "matrix " + std::to_string(b) + ": eigenvectors not orthonormal at [" + std::to_string(i) + "][" +
                 std::to_string(j) + "]";
        }
      }
    }
  }
  return "";
}

void add_eigh(CaseTable& t) {
  const DTypes dtypes = {DType::kFloat32, DType::kFloat64, DType::kComplex64, DType::kComplex128};
  for (const bool vectors : {true, false}) {
    OpCases& c = t.add(vectors ? "linalg.eigh" : "linalg.eigvalsh", dtypes);
    c.compared_outputs = {0};
    c.tolerance_ulps(2048).property(
        [vectors](const Call& call, const Outcome& o) { return eigh_property(call, o, vectors); });
    struct Mat {
      const char* name;
      Shape shape;
      char uplo;
      bool repeated;
      DTypes only;
    };
    const Mat mats[] = {
        {"4x4", {4, 4}, 'L', false, {}},
        {"batch of 5x5, UPLO=U", {3, 5, 5}, 'U', false, {}},
        {"1x1", {1, 1}, 'L', false, {}},
        {"batch 0", {0, 3, 3}, 'L', false, {}},
        {"0x0", {2, 0, 0}, 'L', false, {}},
        {"repeated eigenvalues", {2, 6, 6}, 'L', true, {}},
        {"16x16", {4, 16, 16}, 'U', false, {}},
        {"33x33", {33, 33}, 'L', false, {}},
        {"large batch", {300, 8, 8}, 'L', false, {DType::kFloat32, DType::kFloat64}},
    };
    for (const Mat& mat : mats) {
      c.variant(
          mat.name,
          [mat](DType d, Rng& g) {
            return Call()
                .arg("A", hermitian(d, mat.shape, g, mat.uplo, mat.repeated))
                .arg("UPLO", Attr(std::string(1, mat.uplo)));
          },
          mat.only);
    }
  }
}

}  // namespace

void add_linalg_cases(CaseTable& t) {
  add_matmul(t);
  add_eigh(t);
}

}  // namespace tensord::conformance
