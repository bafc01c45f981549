// Reductions: sum mean amax amin argmax norm over dims, keepdim, dtype
// rules, empty inputs, NaN, error paths, and the parallel / multi-pass paths
// against a brute-force reference.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <random>

#include "ops/kernels/float_conv.h"
#include "tests/unit/ops/op_call_util_ew.h"

namespace tensord {
namespace {

using test_ew::Arg;
using test_ew::call1;
using test_ew::infer_error;
using test_ew::Kwargs;
using test_ew::make;
using test_ew::make_c;
using test_ew::values;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
using Dims = std::vector<int64_t>;

void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 0) {
  auto got = values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else if (tol == 0) {
      EXPECT_EQ(got[i], want[i]) << "at " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << "at " << i;
    }
  }
}

// Brute force: folds x (row-major `shape`) over `reduced` with f, from init.
std::vector<double> reference(const std::vector<double>& x, const Shape& shape, const std::vector<bool>& reduced,
                              double init, const std::function<double(double, double)>& f) {
  Shape out_shape;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (!reduced[i]) out_shape.push_back(shape[i]);
  }
  std::vector<double> out(static_cast<size_t>(shape_numel(out_shape)), init);
  std::vector<int64_t> idx(shape.size(), 0);
  for (size_t k = 0; k < x.size(); ++k) {
    int64_t o = 0;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (!reduced[i]) o = o * shape[i] + idx[i];
    }
    out[static_cast<size_t>(o)] = f(out[static_cast<size_t>(o)], x[k]);
    for (size_t i = shape.size(); i-- > 0;) {
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

// ---------------- sum / mean ----------------

TEST(Reduction, SumBasics) {
  auto x = make(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor r = call1("sum", {x});
  EXPECT_EQ(r.shape(), Shape{});
  EXPECT_EQ(r.dtype(), DType::kFloat32);
  expect_values(r, {21});
  expect_values(call1("sum", {x, 0}), {5, 7, 9});
  r = call1("sum", {x, -1, true});
  EXPECT_EQ(r.shape(), (Shape{2, 1}));
  expect_values(r, {6, 15});
  r = call1("sum", {x, Dims{}});  // [] means all dims
  EXPECT_EQ(r.shape(), Shape{});
  expect_values(r, {21});
  r = call1("sum", {x, Arg()}, {{"keepdim", true}});
  EXPECT_EQ(r.shape(), (Shape{1, 1}));
  // 0-d input, dim 0
  expect_values(call1("sum", {test_ew::scalar(DType::kFloat64, 2.5), 0}), {2.5});
  // reducing only size-1 dims is a copy (the no-fold path)
  auto y = make(DType::kInt32, {2, 1, 3}, {1, 2, 3, 4, 5, 6});
  r = call1("sum", {y, 1});
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  expect_values(r, {1, 2, 3, 4, 5, 6});
  r = call1("amax", {y, Dims{1}, true});
  EXPECT_EQ(r.shape(), (Shape{2, 1, 3}));
  expect_values(r, {1, 2, 3, 4, 5, 6});
  // size-1 dims between reduced ones: [2,1,3] over {0, 2}
  expect_values(call1("sum", {y, Dims{0, 2}}), {21});
  expect_values(call1("amin", {y, Dims{0, 2}, true}), {1});
}

TEST(Reduction, SumDtypes) {
  auto i = make(DType::kInt32, {3}, {2147483647, 1, 1});
  Tensor r = call1("sum", {i});
  EXPECT_EQ(r.dtype(), DType::kInt64);
  expect_values(r, {2147483649.0});
  r = call1("sum", {make(DType::kBool, {4}, {1, 0, 1, 1})});
  EXPECT_EQ(r.dtype(), DType::kInt64);
  expect_values(r, {3});
  r = call1("sum", {make(DType::kUInt8, {2}, {200, 100})});
  EXPECT_EQ(r.dtype(), DType::kInt64);
  expect_values(r, {300});
  r = call1("sum", {i}, {{"dtype", "float64"}});
  EXPECT_EQ(r.dtype(), DType::kFloat64);
  expect_values(r, {2147483649.0});
  r = call1("sum", {make(DType::kFloat16, {3}, {1, 2, 2048})});
  EXPECT_EQ(r.dtype(), DType::kFloat16);
  expect_values(r, {2052});  // 2051 rounds to even once, after a double accumulation
  auto c = make_c(DType::kComplex64, {2}, {{1, 2}, {3, -4}});
  auto got = test_ew::cvalues(call1("sum", {c}));
  EXPECT_EQ(got[0], std::complex<double>(4, -2));
}

TEST(Reduction, SumEmpty) {
  auto e = make(DType::kFloat32, {0, 3}, {});
  Tensor r = call1("sum", {e});
  expect_values(r, {0});
  r = call1("sum", {e, 0});
  EXPECT_EQ(r.shape(), Shape{3});
  expect_values(r, {0, 0, 0});
  r = call1("sum", {e, 1});
  EXPECT_EQ(r.shape(), Shape{0});
  expect_values(call1("mean", {e}), {kNaN});
}

TEST(Reduction, Mean) {
  auto x = make(DType::kFloat64, {2, 2}, {1, 2, 3, 5});
  expect_values(call1("mean", {x}), {2.75});
  expect_values(call1("mean", {x, 1}), {1.5, 4});
  std::string msg;
  EXPECT_EQ(infer_error("mean", {make(DType::kInt64, {2}, {1, 2})}, {}, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("mean"), std::string::npos);
  Tensor r = call1("mean", {make(DType::kInt64, {2}, {1, 2})}, {{"dtype", "float32"}});
  EXPECT_EQ(r.dtype(), DType::kFloat32);
  expect_values(r, {1.5});
  EXPECT_EQ(infer_error("mean", {x}, {{"dtype", "int32"}}), ErrorCode::kInvalidArgument);
  auto c = make_c(DType::kComplex128, {2}, {{1, 2}, {3, 4}});
  EXPECT_EQ(test_ew::cvalues(call1("mean", {c}))[0], std::complex<double>(2, 3));
  Tensor h = call1("mean", {make(DType::kBFloat16, {3}, {1, 2, 4})});
  EXPECT_EQ(h.dtype(), DType::kBFloat16);
  EXPECT_EQ(h.data_ptr<BFloat16>()[0].bits, kernels::f32_to_bf16(static_cast<float>(7.0 / 3.0)));
}

TEST(Reduction, SeveralDimsMatchBruteForce) {
  const Shape shape{3, 4, 5, 6};
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> xv(360);
  for (auto& v : xv) v = u(rng);
  auto x = make(DType::kFloat64, shape, xv);
  // every non-empty subset of dims, with keepdim both ways
  for (int mask = 1; mask < 16; ++mask) {
    Dims dims;
    std::vector<bool> red(4);
    for (int d = 0; d < 4; ++d) {
      red[static_cast<size_t>(d)] = (mask >> d) & 1;
      if (red[static_cast<size_t>(d)]) dims.push_back(d - 4 * (d % 2));  // mix negative dims in
    }
    auto want_sum = reference(xv, shape, red, 0, [](double a, double b) { return a + b; });
    auto want_max = reference(xv, shape, red, -kInf, [](double a, double b) { return std::max(a, b); });
    auto want_min = reference(xv, shape, red, kInf, [](double a, double b) { return std::min(a, b); });
    auto want_sq = reference(xv, shape, red, 0, [](double a, double b) { return a + b * b; });
    for (bool keepdim : {false, true}) {
      Tensor s = call1("sum", {x, dims, keepdim});
      Shape want_shape;
      int64_t count = 1;
      for (int d = 0; d < 4; ++d) {
        if (!red[static_cast<size_t>(d)]) {
          want_shape.push_back(shape[static_cast<size_t>(d)]);
        } else {
          count *= shape[static_cast<size_t>(d)];
          if (keepdim) want_shape.push_back(1);
        }
      }
      EXPECT_EQ(s.shape(), want_shape) << mask;
      expect_values(s, want_sum, 1e-12);
      std::vector<double> want_mean = want_sum;
      for (auto& v : want_mean) v /= static_cast<double>(count);
      expect_values(call1("mean", {x, dims, keepdim}), want_mean, 1e-12);
      expect_values(call1("amax", {x, dims, keepdim}), want_max);
      expect_values(call1("amin", {x, dims, keepdim}), want_min);
      std::vector<double> want_norm = want_sq;
      for (auto& v : want_norm) v = std::sqrt(v);
      expect_values(call1("norm", {x, 2, dims, keepdim}), want_norm, 1e-12);
    }
  }
}

TEST(Reduction, LargeParallelAccurate) {
  ThreadPool pool(3);
  // 1e6 x 0.1f in float32: float64 accumulation keeps ~1e-9 relative error
  const int64_t n = 1000003;
  Tensor x = Tensor::empty_host(DType::kFloat32, {n});
  for (int64_t i = 0; i < n; ++i) x.data_ptr<float>()[i] = 0.1f;
  Tensor r = test_ew::call1("sum", {x}, {}, &pool);
  const double want = static_cast<double>(0.1f) * static_cast<double>(n);
  EXPECT_NEAR(r.data_ptr<float>()[0], want, want * 1e-7);
  Tensor m = test_ew::call1("mean", {x}, {}, &pool);
  EXPECT_EQ(m.data_ptr<float>()[0], 0.1f);
  // same result inline and on the pool (fixed blocking)
  Tensor r1 = test_ew::call1("sum", {x});
  EXPECT_EQ(r1.data_ptr<float>()[0], r.data_ptr<float>()[0]);

  // column reduction with a long R and a short B: [200003, 3] over dim 0
  const int64_t rows = 200003;
  std::vector<double> v(static_cast<size_t>(rows * 3));
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> u(-1000, 1000);
  for (auto& e : v) e = u(rng);
  auto xi = make(DType::kInt32, {rows, 3}, v);
  auto want_cols = reference(v, {rows, 3}, {true, false}, 0, [](double a, double b) { return a + b; });
  expect_values(test_ew::call1("sum", {xi, 0}, {}, &pool), want_cols);
  auto want_max = reference(v, {rows, 3}, {true, false}, -kInf, [](double a, double b) { return std::max(a, b); });
  expect_values(test_ew::call1("amax", {xi, 0}, {}, &pool), want_max);
  auto want_rows = reference(v, {rows, 3}, {false, true}, 0, [](double a, double b) { return a + b; });
  expect_values(test_ew::call1("sum", {xi, 1}, {}, &pool), want_rows);
}

// ---------------- amax / amin ----------------

TEST(Reduction, AmaxAmin) {
  auto x = make(DType::kFloat32, {2, 3}, {1, kNaN, 3, -4, 5, 0});
  expect_values(call1("amax", {x, 1}), {kNaN, 5});
  expect_values(call1("amin", {x, 1}), {kNaN, -4});
  expect_values(call1("amax", {x, 0}), {1, kNaN, 3});
  expect_values(call1("amax", {x}), {kNaN});
  Tensor r = call1("amin", {x, 0, true});
  EXPECT_EQ(r.shape(), (Shape{1, 3}));
  expect_values(r, {-4, kNaN, 0});
  auto i = make(DType::kInt8, {4}, {-128, 127, 0, 5});
  r = call1("amax", {i});
  EXPECT_EQ(r.dtype(), DType::kInt8);
  expect_values(r, {127});
  expect_values(call1("amin", {i}), {-128});
  auto b = make(DType::kBool, {2, 2}, {0, 1, 0, 0});
  r = call1("amax", {b, 1});
  EXPECT_EQ(r.dtype(), DType::kBool);
  expect_values(r, {1, 0});
  expect_values(call1("amin", {make(DType::kBool, {2}, {1, 1})}), {1});
  auto h = make(DType::kFloat16, {3}, {0.1, 0.3, 0.2});
  r = call1("amax", {h});
  EXPECT_EQ(r.dtype(), DType::kFloat16);
  EXPECT_EQ(r.data_ptr<Half>()[0].bits, kernels::f32_to_f16(0.3f));
  // empty reductions have no identity
  std::string msg;
  EXPECT_EQ(infer_error("amax", {make(DType::kFloat32, {0, 3}, {}), 0}, {}, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("amax"), std::string::npos);
  EXPECT_EQ(infer_error("amin", {make(DType::kFloat32, {0}, {})}), ErrorCode::kInvalidArgument);
  // reducing a non-empty dim of an empty tensor is fine
  EXPECT_EQ(call1("amax", {make(DType::kFloat32, {0, 3}, {}), 1}).shape(), Shape{0});
  EXPECT_EQ(infer_error("amax", {make_c(DType::kComplex64, {1}, {{1, 1}})}), ErrorCode::kInvalidArgument);
}

// ---------------- argmax ----------------

TEST(Reduction, Argmax) {
  auto x = make(DType::kFloat32, {2, 4}, {1, 5, 5, 2, 3, kNaN, 7, kNaN});
  Tensor r = call1("argmax", {x});
  EXPECT_EQ(r.dtype(), DType::kInt64);
  EXPECT_EQ(r.shape(), Shape{});
  expect_values(r, {5});                           // first NaN of the flattened input
  expect_values(call1("argmax", {x, 1}), {1, 1});  // tie -> first; NaN is the max
  expect_values(call1("argmax", {x, 0}), {1, 1, 1, 1});
  r = call1("argmax", {x, -1, true});
  EXPECT_EQ(r.shape(), (Shape{2, 1}));
  r = call1("argmax", {x}, {{"keepdim", true}});
  EXPECT_EQ(r.shape(), (Shape{1, 1}));
  expect_values(r, {5});
  expect_values(call1("argmax", {make(DType::kInt32, {5}, {-3, 9, 2, 9, 9})}), {1});
  expect_values(call1("argmax", {make(DType::kBFloat16, {3}, {-1, -0.5, -2})}), {1});
  expect_values(call1("argmax", {make(DType::kBool, {3}, {0, 1, 1})}), {1});
  expect_values(call1("argmax", {test_ew::scalar(DType::kFloat32, 4)}), {0});
  EXPECT_EQ(infer_error("argmax", {make(DType::kFloat32, {0}, {})}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(infer_error("argmax", {make(DType::kFloat32, {2, 0}, {}), 1}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(infer_error("argmax", {x, 2}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(infer_error("argmax", {make_c(DType::kComplex64, {1}, {{1, 1}})}), ErrorCode::kInvalidArgument);
}

TEST(Reduction, ArgmaxLargeAcrossBlocks) {
  ThreadPool pool(3);
  const int64_t n = 300007;
  std::vector<double> v(static_cast<size_t>(n), 1.0);
  v[70000] = 9;  // ties across parallel blocks: the first one wins
  v[250000] = 9;
  auto x = make(DType::kFloat32, {n}, v);
  expect_values(test_ew::call1("argmax", {x}, {}, &pool), {70000});
  v[280000] = kNaN;
  auto y = make(DType::kFloat64, {n}, v);
  expect_values(test_ew::call1("argmax", {y}, {}, &pool), {280000});
  // column argmax
  std::vector<double> c(static_cast<size_t>(n * 2), 0.0);
  c[2 * 1234 + 1] = 5;
  c[2 * 99999] = 3;
  auto z = make(DType::kInt16, {n, 2}, c);
  expect_values(test_ew::call1("argmax", {z, 0}, {}, &pool), {99999, 1234});
}

// ---------------- norm ----------------

TEST(Reduction, Norm) {
  auto x = make(DType::kFloat32, {2, 2}, {3, -4, 0, 12});
  expect_values(call1("norm", {x}), {std::sqrt(169.0 + 0)}, 1e-6);
  expect_values(call1("norm", {x, 2, 1}), {5, 12}, 1e-7);
  expect_values(call1("norm", {x, 1, 1}), {7, 12});
  expect_values(call1("norm", {x, "inf"}), {12});
  expect_values(call1("norm", {x, kInf, 0}), {3, 12});
  expect_values(call1("norm", {x, "-inf", 1}), {3, 0});
  expect_values(call1("norm", {x, 0}), {3});
  expect_values(call1("norm", {x, 3, 1}), {std::cbrt(27.0 + 64.0), 12}, 1e-6);
  expect_values(call1("norm", {x, "fro"}), {13}, 1e-6);
  Tensor r = call1("norm", {x, 2, Dims{0, 1}, true});
  EXPECT_EQ(r.shape(), (Shape{1, 1}));
  auto c = make_c(DType::kComplex64, {2}, {{3, 4}, {0, 0}});
  r = call1("norm", {c});
  EXPECT_EQ(r.dtype(), DType::kFloat32);
  expect_values(r, {5}, 1e-7);
  EXPECT_EQ(call1("norm", {c, 1}).dtype(), DType::kFloat32);
  expect_values(call1("norm", {make(DType::kFloat32, {0}, {})}), {0});
  EXPECT_EQ(infer_error("norm", {make(DType::kFloat32, {0}, {}), "inf"}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(infer_error("norm", {make(DType::kInt32, {2}, {1, 2})}), ErrorCode::kInvalidArgument);
  r = call1("norm", {make(DType::kInt32, {2}, {3, 4})}, {{"dtype", "float64"}});
  EXPECT_EQ(r.dtype(), DType::kFloat64);
  expect_values(r, {5});
  EXPECT_EQ(infer_error("norm", {x, "nuc"}), ErrorCode::kInvalidArgument);
  expect_values(call1("norm", {make(DType::kFloat64, {2}, {1, kNaN})}), {kNaN});
  expect_values(call1("norm", {make(DType::kFloat64, {2}, {1, kNaN}), "inf"}), {kNaN});
}

// ---------------- errors ----------------

TEST(Reduction, BadDims) {
  auto x = make(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  for (const char* op : {"sum", "mean", "amax", "amin", "norm"}) {
    const bool norm = std::string(op) == "norm";
    std::vector<Arg> out_of_range = norm ? std::vector<Arg>{x, 2, 2} : std::vector<Arg>{x, 2};
    std::vector<Arg> dup = norm ? std::vector<Arg>{x, 2, Dims{0, -2}} : std::vector<Arg>{x, Dims{0, -2}};
    std::string msg;
    EXPECT_EQ(infer_error(op, out_of_range, {}, &msg), ErrorCode::kInvalidArgument) << op;
    EXPECT_EQ(msg.rfind(op, 0), 0u) << msg;
    EXPECT_EQ(infer_error(op, dup, {}, &msg), ErrorCode::kInvalidArgument) << op;
    EXPECT_NE(msg.find("multiple times"), std::string::npos) << msg;
  }
  EXPECT_EQ(infer_error("argmax", {x, -3}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(infer_error("sum", {x}, {{"dtype", "float33"}}), ErrorCode::kInvalidArgument);
}

TEST(Reduction, Registered) {
  for (const char* op : {"sum", "mean", "amax", "amin", "argmax", "norm"}) {
    const OpDef* d = OpRegistry::global().find(op);
    ASSERT_NE(d, nullptr) << op;
    EXPECT_TRUE(d->kernels.count("cpu")) << op;
  }
  EXPECT_EQ(test_ew::op_def("sum").signature(),
            "sum(Tensor input, int[]? dim=None, bool keepdim=False, *, dtype? dtype=None) -> Tensor");
}

}  // namespace
}  // namespace tensord
