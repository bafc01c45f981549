// Elementwise ops: type promotion, broadcasting, every op, error paths,
// narrow-float rounding, and the parallel/broadcast/cast paths of the engine.
// Long file: one suite per op family shares the promotion and broadcasting
// helpers at its top; split, each part would repeat them.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <random>

#include "ops/cpu/half_simd.h"
#include "ops/kernels/float_conv.h"
#include "ops/type_promotion.h"
#include "tests/unit/ops/op_call_util_ew.h"

namespace tensord {
namespace {

using test_ew::Arg;
using test_ew::call1;
using test_ew::call_error;
using test_ew::cvalues;
using test_ew::infer_error;
using test_ew::Kwargs;
using test_ew::make;
using test_ew::make_c;
using test_ew::scalar;
using test_ew::values;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TensorMeta m(DType t, Shape s, bool wrapped = false) {
  TensorMeta r;
  r.dtype = t;
  r.shape = std::move(s);
  r.wrapped_number = wrapped;
  return r;
}

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

// ---------------- type promotion ----------------

TEST(EwTypePromotion, ResultTypeTable) {
  using D = DType;
  // dim tensor + wrapped float -> default float
  EXPECT_EQ(result_type(m(D::kInt32, {3}), m(D::kFloat64, {}, true)), D::kFloat32);
  // dim int64 + 0-dim float64 (not wrapped) -> float64
  EXPECT_EQ(result_type(m(D::kInt64, {3}), m(D::kFloat64, {})), D::kFloat64);
  // dim float32 + 0-dim float64 -> float32 (same category, higher tier wins)
  EXPECT_EQ(result_type(m(D::kFloat32, {3}), m(D::kFloat64, {})), D::kFloat32);
  EXPECT_EQ(result_type(m(D::kUInt8, {3}), m(D::kInt8, {3})), D::kInt16);
  EXPECT_EQ(result_type(m(D::kBool, {3}), m(D::kBool, {3})), D::kBool);
  EXPECT_EQ(result_type(m(D::kFloat16, {3}), m(D::kBFloat16, {3})), D::kFloat32);
  // int tensor + wrapped complex -> complex64; float64 tensor + wrapped complex -> complex128
  EXPECT_EQ(result_type(m(D::kInt32, {3}), m(D::kComplex128, {}, true)), D::kComplex64);
  EXPECT_EQ(result_type(m(D::kFloat64, {3}), m(D::kComplex128, {}, true)), D::kComplex128);
  // wrapped int does not widen an int tensor; bool tensor + int -> int64
  EXPECT_EQ(result_type(m(D::kInt32, {3}), m(D::kInt64, {}, true)), D::kInt32);
  EXPECT_EQ(result_type(m(D::kBool, {3}), m(D::kInt64, {}, true)), D::kInt64);
  EXPECT_EQ(result_type(m(D::kUInt8, {3}), m(D::kInt64, {}, true)), D::kUInt8);
  // float16 tensor + 0-dim float32 -> float16
  EXPECT_EQ(result_type(m(D::kFloat16, {3}), m(D::kFloat32, {})), D::kFloat16);
  // 0-dim int32 + wrapped float -> float32; 0-dim tensors promote among themselves
  EXPECT_EQ(result_type(m(D::kInt32, {}), m(D::kFloat64, {}, true)), D::kFloat32);
  EXPECT_EQ(result_type(m(D::kInt8, {}), m(D::kInt16, {})), D::kInt16);
  // int tensor + 0-dim float16 -> float16
  EXPECT_EQ(result_type(m(D::kInt64, {2}), m(D::kFloat16, {})), D::kFloat16);
  // three operands
  EXPECT_EQ(result_type(std::vector<TensorMeta>{m(D::kInt16, {2}), m(D::kInt32, {}), m(D::kFloat64, {}, true)}),
            D::kFloat32);
  EXPECT_TRUE(can_cast(D::kInt32, D::kFloat16));
  EXPECT_FALSE(can_cast(D::kFloat32, D::kInt64));
  EXPECT_FALSE(can_cast(D::kInt8, D::kBool));
}

TEST(EwTypePromotion, ThroughOps) {
  auto x = make(DType::kInt32, {3}, {1, 2, 3});
  Tensor r = call1("add", {x, 2.5});
  EXPECT_EQ(r.dtype(), DType::kFloat32);
  expect_values(r, {3.5, 4.5, 5.5});
  r = call1("add", {make(DType::kInt64, {2}, {1, 2}), scalar(DType::kFloat64, 0.25)});
  EXPECT_EQ(r.dtype(), DType::kFloat64);
  expect_values(r, {1.25, 2.25});
  r = call1("add", {make(DType::kUInt8, {2}, {200, 1}), make(DType::kInt8, {2}, {-100, -2})});
  EXPECT_EQ(r.dtype(), DType::kInt16);
  expect_values(r, {100, -1});
  r = call1("add", {make(DType::kBool, {4}, {0, 0, 1, 1}), make(DType::kBool, {4}, {0, 1, 0, 1})});
  EXPECT_EQ(r.dtype(), DType::kBool);
  expect_values(r, {0, 1, 1, 1});
  r = call1("mul", {make(DType::kFloat16, {2}, {1.5, 2}), make(DType::kBFloat16, {2}, {2, 3})});
  EXPECT_EQ(r.dtype(), DType::kFloat32);
  expect_values(r, {3, 6});
  r = call1("add", {x, 7});
  EXPECT_EQ(r.dtype(), DType::kInt32);
  expect_values(r, {8, 9, 10});
}

// ---------------- binary arithmetic ----------------

TEST(EwBinary, AddBroadcasting) {
  auto a = make(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = make(DType::kFloat32, {3}, {10, 20, 30});
  expect_values(call1("add", {a, b}), {11, 22, 33, 14, 25, 36});
  auto col = make(DType::kFloat32, {2, 1}, {100, 200});
  auto row = make(DType::kFloat32, {1, 3}, {1, 2, 3});
  Tensor r = call1("add", {col, row});
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  expect_values(r, {101, 102, 103, 201, 202, 203});
  // rank-extending broadcast with a middle broadcast dim: [2,1,2] + [3,1]
  auto c = make(DType::kInt64, {2, 1, 2}, {1, 2, 3, 4});
  auto d = make(DType::kInt64, {3, 1}, {10, 20, 30});
  r = call1("add", {c, d});
  EXPECT_EQ(r.shape(), (Shape{2, 3, 2}));
  expect_values(r, {11, 12, 21, 22, 31, 32, 13, 14, 23, 24, 33, 34});
  // 0-d + 0-d
  r = call1("add", {scalar(DType::kFloat32, 1), scalar(DType::kFloat32, 2)});
  EXPECT_EQ(r.shape(), Shape{});
  expect_values(r, {3});
  // empty
  r = call1("add", {make(DType::kFloat32, {0, 3}, {}), b});
  EXPECT_EQ(r.shape(), (Shape{0, 3}));
}

TEST(EwBinary, AddSubAlpha) {
  auto a = make(DType::kFloat32, {3}, {1, 2, 3});
  auto b = make(DType::kFloat32, {3}, {1, 1, 2});
  expect_values(call1("add", {a, b}, {{"alpha", 2.5}}), {3.5, 4.5, 8});
  expect_values(call1("sub", {a, b}, {{"alpha", 2}}), {-1, 0, -1});
  auto i = make(DType::kInt32, {2}, {5, 6});
  expect_values(call1("sub", {i, 1}, {{"alpha", 3}}), {2, 3});
  EXPECT_EQ(infer_error("add", {i, i}, {{"alpha", 2.5}}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(infer_error("add", {a, b}, {{"alpha", true}}), ErrorCode::kInvalidArgument);
  // integral alpha written as 2.0 is fine
  expect_values(call1("add", {i, i}, {{"alpha", 2.0}}), {15, 18});
  // bool + bool with alpha true/false
  auto t = make(DType::kBool, {2}, {0, 1});
  expect_values(call1("add", {t, t}, {{"alpha", false}}), {0, 1});
}

TEST(EwBinary, SubRejectsBool) {
  auto t = make(DType::kBool, {2}, {0, 1});
  std::string msg;
  EXPECT_EQ(infer_error("sub", {t, t}, {}, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("sub"), std::string::npos);
  EXPECT_EQ(infer_error("sub", {make(DType::kFloat32, {2}, {1, 2}), true}), ErrorCode::kInvalidArgument);
}

TEST(EwBinary, IntegerWraps) {
  auto a = make(DType::kInt32, {2}, {2147483647, -2147483648.0});
  expect_values(call1("add", {a, 1}), {-2147483648.0, -2147483647});
  expect_values(call1("mul", {a, 2}), {-2, 0});
  auto b = make(DType::kInt8, {2}, {127, -128});
  expect_values(call1("add", {b, make(DType::kInt8, {1}, {1})}), {-128, -127});
  expect_values(call1("neg", {b}), {-127, -128});
  expect_values(call1("abs", {b}), {127, -128});
}

TEST(EwBinary, Div) {
  auto i = make(DType::kInt64, {3}, {1, 2, 3});
  Tensor r = call1("div", {i, 2});
  EXPECT_EQ(r.dtype(), DType::kFloat32);
  expect_values(r, {0.5, 1, 1.5});
  auto n = make(DType::kInt32, {4}, {-7, 7, -8, 0});
  expect_values(call1("div", {n, 2}, {{"rounding_mode", "trunc"}}), {-3, 3, -4, 0});
  expect_values(call1("div", {n, 2}, {{"rounding_mode", "floor"}}), {-4, 3, -4, 0});
  expect_values(call1("div", {n, -2}, {{"rounding_mode", "floor"}}), {3, -4, 4, 0});
  EXPECT_EQ(call1("div", {n, 2}, {{"rounding_mode", "floor"}}).dtype(), DType::kInt32);
  auto f = make(DType::kFloat64, {4}, {-7.5, 7.5, 1, -1});
  expect_values(call1("div", {f, 2}, {{"rounding_mode", "floor"}}), {-4, 3, 0, -1});
  expect_values(call1("div", {f, 2}, {{"rounding_mode", "trunc"}}), {-3, 3, 0, -0.0});
  expect_values(call1("div", {f, 0.0}), {-kInf, kInf, kInf, -kInf});
  // INT64_MIN / -1 wraps instead of trapping
  auto mn = make(DType::kInt64, {1}, {0});
  mn.data_ptr<int64_t>()[0] = std::numeric_limits<int64_t>::min();
  Tensor q = call1("div", {mn, -1}, {{"rounding_mode", "floor"}});
  EXPECT_EQ(q.data_ptr<int64_t>()[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(call_error("div", {n, 0}, {{"rounding_mode", "trunc"}}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(call_error("div", {n, make(DType::kInt32, {4}, {1, 1, 0, 1})}, {{"rounding_mode", "floor"}}),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(infer_error("div", {n, 2}, {{"rounding_mode", "round"}}), ErrorCode::kInvalidArgument);
  auto c = make_c(DType::kComplex64, {1}, {{1, 1}});
  EXPECT_EQ(infer_error("div", {c, c}, {{"rounding_mode", "floor"}}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(infer_error("div", {make(DType::kBool, {1}, {1}), true}, {{"rounding_mode", "floor"}}),
            ErrorCode::kInvalidArgument);
}

TEST(EwBinary, Pow) {
  auto f = make(DType::kFloat32, {3}, {2, 3, 4});
  expect_values(call1("pow", {f, 2}), {4, 9, 16});
  Tensor r = call1("pow", {make(DType::kInt32, {3}, {4, 9, 16}), 0.5});
  EXPECT_EQ(r.dtype(), DType::kFloat32);
  expect_values(r, {2, 3, 4});
  auto i = make(DType::kInt64, {4}, {2, 3, 1, -1});
  expect_values(call1("pow", {i, make(DType::kInt64, {4}, {10, 3, -5, -3})}), {1024, 27, 1, -1});
  expect_values(call1("pow", {i, make(DType::kInt64, {4}, {-1, 0, 7, 2})}), {0, 1, 1, 1});
  EXPECT_EQ(call_error("pow", {i, -2}), ErrorCode::kInvalidArgument);
  // scalar base
  r = call1("pow", {2, make(DType::kFloat32, {2}, {3, 0.5})});
  EXPECT_EQ(r.dtype(), DType::kFloat32);
  expect_values(r, {8, std::sqrt(2.0)}, 1e-6);
  EXPECT_EQ(infer_error("pow", {make(DType::kBool, {1}, {1}), true}), ErrorCode::kInvalidArgument);
  // Python-number exponents take PyTorch's special cases; the general case
  // is computed in double
  auto g = make(DType::kFloat32, {4}, {-0.0, 4, 0.3, 2});
  Tensor sq = call1("pow", {g, 0.5});
  EXPECT_TRUE(std::signbit(sq.data_ptr<float>()[0]));  // sqrt(-0) = -0 (pow would give +0)
  expect_values(sq, {0, 2, std::sqrt(0.3f), std::sqrt(2.0f)});
  expect_values(call1("pow", {g, -0.5}), {-kInf, 0.5, 1 / std::sqrt(0.3f), 1 / std::sqrt(2.0f)});
  expect_values(call1("pow", {g, -1}), {-kInf, 0.25, 1 / 0.3f, 0.5});
  expect_values(call1("pow", {g, 3}), {-0.0, 64, 0.3f * 0.3f * 0.3f, 8});
  expect_values(call1("pow", {g, -2}), {kInf, 1 / 16.0f, 1 / (0.3f * 0.3f), 0.25});
  const float g2 = 0.3f;
  expect_values(call1("pow", {g, 1.7}),
                {0, static_cast<float>(std::pow(4.0, 1.7)), static_cast<float>(std::pow(static_cast<double>(g2), 1.7)),
                 static_cast<float>(std::pow(2.0, 1.7))});
  auto c = make_c(DType::kComplex128, {1}, {{1, 2}});
  auto got = cvalues(call1("pow", {c, 2}));
  EXPECT_NEAR(got[0].real(), -3, 1e-12);
  EXPECT_NEAR(got[0].imag(), 4, 1e-12);
}

TEST(EwBinary, MaximumMinimum) {
  auto a = make(DType::kFloat32, {4}, {1, kNaN, 3, -0.5});
  auto b = make(DType::kFloat32, {4}, {2, 1, kNaN, -1});
  expect_values(call1("maximum", {a, b}), {2, kNaN, kNaN, -0.5});
  expect_values(call1("minimum", {a, b}), {1, kNaN, kNaN, -1});
  auto i = make(DType::kInt16, {3}, {-5, 0, 5});
  Tensor r = call1("maximum", {i, make(DType::kInt32, {1}, {1})});
  EXPECT_EQ(r.dtype(), DType::kInt32);
  expect_values(r, {1, 1, 5});
  expect_values(call1("minimum", {make(DType::kBool, {2}, {0, 1}), make(DType::kBool, {2}, {1, 1})}), {0, 1});
  auto c = make_c(DType::kComplex64, {1}, {{1, 1}});
  EXPECT_EQ(infer_error("maximum", {c, c}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(infer_error("minimum", {c, c}), ErrorCode::kInvalidArgument);
}

TEST(EwBinary, Complex) {
  const std::complex<double> x(1.5, -2), y(-0.5, 3);
  auto a = make_c(DType::kComplex128, {1}, {x});
  auto b = make_c(DType::kComplex128, {1}, {y});
  auto near = [](std::complex<double> g, std::complex<double> w) {
    EXPECT_NEAR(g.real(), w.real(), 1e-12);
    EXPECT_NEAR(g.imag(), w.imag(), 1e-12);
  };
  near(cvalues(call1("add", {a, b}))[0], x + y);
  near(cvalues(call1("sub", {a, b}))[0], x - y);
  near(cvalues(call1("mul", {a, b}))[0], x * y);
  near(cvalues(call1("div", {a, b}))[0], x / y);
  near(cvalues(call1("neg", {a}))[0], -x);
  near(cvalues(call1("exp", {a}))[0], std::exp(x));
  near(cvalues(call1("log", {a}))[0], std::log(x));
  near(cvalues(call1("sqrt", {a}))[0], std::sqrt(x));
  Tensor ab = call1("abs", {make_c(DType::kComplex64, {2}, {{3, 4}, {0, -2}})});
  EXPECT_EQ(ab.dtype(), DType::kFloat32);
  expect_values(ab, {5, 2});
  EXPECT_EQ(call1("abs", {a}).dtype(), DType::kFloat64);
  expect_values(call1("eq", {a, a}), {1});
  expect_values(call1("ne", {a, b}), {1});
  // float tensor * complex tensor -> complex of the wider real part
  Tensor r = call1("mul", {make(DType::kFloat64, {1}, {2}), make_c(DType::kComplex64, {1}, {{1, 1}})});
  EXPECT_EQ(r.dtype(), DType::kComplex128);
  near(cvalues(r)[0], {2, 2});
  for (const char* op : {"lt", "le", "gt", "ge"}) {
    EXPECT_EQ(infer_error(op, {a, b}), ErrorCode::kInvalidArgument) << op;
  }
  EXPECT_EQ(infer_error("clamp", {a, 0}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(infer_error("relu", {a}), ErrorCode::kInvalidArgument);
}

// ---------------- comparisons, logic, where ----------------

TEST(EwCompare, AllComparisons) {
  auto a = make(DType::kFloat32, {2, 3}, {1, 2, 3, kNaN, 5, 6});
  auto b = make(DType::kInt64, {3}, {2, 2, 2});
  struct Case {
    const char* op;
    std::vector<double> want;
  };
  for (const Case& c :
       {Case{"eq", {0, 1, 0, 0, 0, 0}}, Case{"ne", {1, 0, 1, 1, 1, 1}}, Case{"lt", {1, 0, 0, 0, 0, 0}},
        Case{"le", {1, 1, 0, 0, 0, 0}}, Case{"gt", {0, 0, 1, 0, 1, 1}}, Case{"ge", {0, 1, 1, 0, 1, 1}}}) {
    Tensor r = call1(c.op, {a, b});
    EXPECT_EQ(r.dtype(), DType::kBool) << c.op;
    EXPECT_EQ(r.shape(), (Shape{2, 3})) << c.op;
    expect_values(r, c.want);
  }
  // int compared with a float scalar: compared in float32
  expect_values(call1("lt", {make(DType::kInt32, {3}, {1, 2, 3}), 2.5}), {1, 1, 0});
}

TEST(EwCompare, LogicalOps) {
  auto a = make(DType::kFloat32, {4}, {0, 1, kNaN, -2});
  auto b = make(DType::kInt32, {4}, {0, 0, 3, 1});
  expect_values(call1("logical_and", {a, b}), {0, 0, 1, 1});
  expect_values(call1("logical_or", {a, b}), {0, 1, 1, 1});
  expect_values(call1("logical_not", {a}), {1, 0, 0, 0});
  Tensor r = call1("logical_and", {a, make(DType::kBool, {1}, {1})});
  EXPECT_EQ(r.dtype(), DType::kBool);
  expect_values(r, {0, 1, 1, 1});
  expect_values(call1("logical_not", {make_c(DType::kComplex64, {2}, {{0, 0}, {0, 1}})}), {1, 0});
}

TEST(EwCompare, Where) {
  auto c = make(DType::kBool, {2, 1}, {1, 0});
  auto x = make(DType::kInt32, {3}, {1, 2, 3});
  Tensor r = call1("where", {c, x, 0.5});
  EXPECT_EQ(r.dtype(), DType::kFloat32);
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  expect_values(r, {1, 2, 3, 0.5, 0.5, 0.5});
  auto cc = make(DType::kBool, {4}, {1, 0, 0, 1});
  r = call1("where", {cc, make(DType::kFloat64, {4}, {1, 2, 3, 4}), make(DType::kInt8, {4}, {-1, -2, -3, -4})});
  EXPECT_EQ(r.dtype(), DType::kFloat64);
  expect_values(r, {1, -2, -3, 4});
  r = call1("where", {cc, 1, 0});
  EXPECT_EQ(r.dtype(), DType::kInt64);
  expect_values(r, {1, 0, 0, 1});
  EXPECT_EQ(infer_error("where", {make(DType::kFloat32, {1}, {1}), x, x}), ErrorCode::kDtypeMismatch);
  std::string msg;
  EXPECT_EQ(infer_error("where", {cc, x, x}, {}, &msg), ErrorCode::kShapeMismatch);
  EXPECT_NE(msg.find("where"), std::string::npos);
}

TEST(EwErrors, NonBroadcastableNamesOp) {
  auto a = make(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = make(DType::kFloat32, {4}, {1, 2, 3, 4});
  for (const char* op : {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
                         "logical_and", "logical_or"}) {
    std::string msg;
    EXPECT_EQ(infer_error(op, {a, b}, {}, &msg), ErrorCode::kShapeMismatch) << op;
    EXPECT_EQ(msg.rfind(op, 0), 0u) << op << ": " << msg;
  }
  std::string msg;
  EXPECT_EQ(infer_error("clamp", {a, b}, {}, &msg), ErrorCode::kShapeMismatch);
  EXPECT_EQ(msg.rfind("clamp", 0), 0u);
}

// ---------------- unary ----------------

TEST(EwUnary, FloatingFunctions) {
  const std::vector<double> in = {0.25, 1, 2.5, 9};
  auto f = make(DType::kFloat64, {4}, in);
  auto want = [&](double (*fn)(double)) {
    std::vector<double> w;
    for (double v : in) w.push_back(fn(v));
    return w;
  };
  expect_values(call1("exp", {f}), want([](double v) { return std::exp(v); }), 1e-15);
  expect_values(call1("log", {f}), want([](double v) { return std::log(v); }), 1e-15);
  expect_values(call1("sqrt", {f}), want([](double v) { return std::sqrt(v); }), 1e-15);
  expect_values(call1("rsqrt", {f}), want([](double v) { return 1 / std::sqrt(v); }), 1e-15);
  expect_values(call1("sigmoid", {f}), want([](double v) { return 1 / (1 + std::exp(-v)); }), 1e-15);
  expect_values(call1("tanh", {f}), want([](double v) { return std::tanh(v); }), 1e-15);
  // integers and bool promote to float32
  for (const char* op : {"exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh"}) {
    Tensor r = call1(op, {make(DType::kInt32, {2}, {1, 4})});
    EXPECT_EQ(r.dtype(), DType::kFloat32) << op;
    EXPECT_EQ(call1(op, {make(DType::kBool, {1}, {1})}).dtype(), DType::kFloat32) << op;
  }
  expect_values(call1("sqrt", {make(DType::kInt64, {2}, {4, 9})}), {2, 3});
  expect_values(call1("log", {make(DType::kFloat32, {3}, {0, -1, 1})}), {-kInf, kNaN, 0});
  // float32 exp/tanh/sigmoid (vec_math.h): the float nearest the exact value
  std::vector<double> xs;
  for (double v = -120; v <= 120; v += 0.173) xs.push_back(static_cast<float>(v));
  for (double v : {0.0, -0.0, 1e-30, -1e-7, 0.0625, -0.0624, 88.72283, 88.7229, -103.9, kInf, -kInf, kNaN}) {
    xs.push_back(static_cast<float>(v));
  }
  auto fx = make(DType::kFloat32, {static_cast<int64_t>(xs.size())}, xs);
  struct Fn {
    const char* op;
    double (*ref)(double);
  };
  for (const Fn& fn :
       {Fn{"exp", [](double v) { return std::exp(v); }}, Fn{"tanh", [](double v) { return std::tanh(v); }},
        Fn{"sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }}}) {
    Tensor r = call1(fn.op, {fx});
    for (size_t i = 0; i < xs.size(); ++i) {
      const float want = static_cast<float>(fn.ref(xs[i]));
      const float got = r.data_ptr<float>()[i];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << fn.op << "(" << xs[i] << ")";
      } else {
        EXPECT_EQ(got, want) << fn.op << "(" << xs[i] << ")";
        EXPECT_EQ(std::signbit(got), std::signbit(want)) << fn.op << "(" << xs[i] << ")";
      }
    }
  }
  // broadcast 0-d input and float16 through the same path
  expect_values(call1("tanh", {make(DType::kFloat32, {}, {0.5})}), {static_cast<float>(std::tanh(0.5))});
  Tensor eh = call1("exp", {make(DType::kFloat16, {2}, {1, -2})});
  EXPECT_EQ(eh.data_ptr<Half>()[0].bits, kernels::f32_to_f16(static_cast<float>(std::exp(1.0))));
  EXPECT_EQ(eh.data_ptr<Half>()[1].bits, kernels::f32_to_f16(static_cast<float>(std::exp(-2.0))));
}

TEST(EwUnary, NegAbsReluLogicalNot) {
  auto f = make(DType::kFloat32, {4}, {-1.5, 0, 2, kNaN});
  expect_values(call1("neg", {f}), {1.5, -0.0, -2, kNaN});
  expect_values(call1("abs", {f}), {1.5, 0, 2, kNaN});
  expect_values(call1("relu", {f}), {0, 0, 2, kNaN});
  expect_values(call1("relu", {make(DType::kInt32, {3}, {-3, 0, 3})}), {0, 0, 3});
  EXPECT_EQ(call1("relu", {make(DType::kInt32, {1}, {1})}).dtype(), DType::kInt32);
  expect_values(call1("abs", {make(DType::kBool, {2}, {0, 1})}), {0, 1});
  EXPECT_EQ(infer_error("neg", {make(DType::kBool, {1}, {1})}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(infer_error("relu", {make(DType::kBool, {1}, {1})}), ErrorCode::kInvalidArgument);
  Tensor ln = call1("logical_not", {make(DType::kInt8, {3}, {0, 5, -1})});
  EXPECT_EQ(ln.dtype(), DType::kBool);
  expect_values(ln, {1, 0, 0});
}

TEST(EwUnary, Clamp) {
  auto f = make(DType::kFloat32, {5}, {-2, -0.5, 0.5, 3, kNaN});
  expect_values(call1("clamp", {f, -1, 1}), {-1, -0.5, 0.5, 1, kNaN});
  expect_values(call1("clamp", {f}, {{"min", 0}}), {0, 0, 0.5, 3, kNaN});
  expect_values(call1("clamp", {f}, {{"max", 0}}), {-2, -0.5, 0, 0, kNaN});
  // min > max gives max
  expect_values(call1("clamp", {f, 2, 1}), {1, 1, 1, 1, kNaN});
  // NaN bound gives NaN
  expect_values(call1("clamp", {make(DType::kFloat64, {1}, {1}), kNaN, 2}), {kNaN});
  // int tensor with float bound promotes
  Tensor r = call1("clamp", {make(DType::kInt32, {3}, {-5, 0, 5}), 0.5});
  EXPECT_EQ(r.dtype(), DType::kFloat32);
  expect_values(r, {0.5, 0.5, 5});
  r = call1("clamp", {make(DType::kInt32, {3}, {-5, 0, 5}), -1, 1});
  EXPECT_EQ(r.dtype(), DType::kInt32);
  expect_values(r, {-1, 0, 1});
  // tensor bounds broadcast: [2,1] lo, [3] hi
  auto x = make(DType::kFloat32, {2, 3}, {0, 5, 10, 0, 5, 10});
  r = call1("clamp", {x, make(DType::kFloat32, {2, 1}, {1, 6}), make(DType::kFloat32, {3}, {8, 8, 9})});
  expect_values(r, {1, 5, 9, 6, 6, 9});
  EXPECT_EQ(infer_error("clamp", {x}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(infer_error("clamp", {make(DType::kBool, {1}, {1}), make(DType::kBool, {1}, {0})}),
            ErrorCode::kInvalidArgument);
  // bool input with int bounds promotes to int64
  r = call1("clamp", {make(DType::kBool, {2}, {0, 1}), 0, 1});
  EXPECT_EQ(r.dtype(), DType::kInt64);
  expect_values(r, {0, 1});
}

// ---------------- casts ----------------

TEST(EwCast, To) {
  auto f = make(DType::kFloat32, {4}, {1.7, -1.7, 300, kNaN});
  Tensor r = call1("to", {f, "int32"});
  EXPECT_EQ(r.dtype(), DType::kInt32);
  expect_values(r, {1, -1, 300, 0});
  expect_values(call1("to", {f}, {{"dtype", "bool"}}), {1, 1, 1, 1});
  // same dtype: the input itself unless copy=true
  Tensor same = call1("to", {f, "float32"});
  EXPECT_EQ(same.data(), f.data());
  Tensor copied = call1("to", {f, "float32"}, {{"copy", true}});
  EXPECT_NE(copied.data(), f.data());
  expect_values(copied, {1.7f, -1.7f, 300, kNaN});
  Tensor h = call1("to", {make(DType::kFloat64, {1}, {0.1}), "float16"});
  EXPECT_EQ(h.data_ptr<Half>()[0].bits, kernels::f32_to_f16(0.1f));
  EXPECT_EQ(infer_error("to", {f, "float33"}), ErrorCode::kInvalidArgument);
}

TEST(EwCast, CopyBroadcastsAndLeavesSelf) {
  const OpDef& op = test_ew::op_def("copy_");
  EXPECT_EQ(op.mutates, 0);
  EXPECT_EQ(op.outputs, std::vector<std::string>{"self"});
  auto self = make(DType::kInt32, {2, 3}, {0, 0, 0, 0, 0, 0});
  auto src = make(DType::kFloat64, {3}, {1.9, -2.9, 3});
  Tensor r = call1("copy_", {self, src});
  EXPECT_EQ(r.dtype(), DType::kInt32);
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  expect_values(r, {1, -2, 3, 1, -2, 3});
  EXPECT_NE(r.data(), self.data());
  expect_values(self, {0, 0, 0, 0, 0, 0});
  expect_values(call1("copy_", {self, 7}), {7, 7, 7, 7, 7, 7});
  std::string msg;
  EXPECT_EQ(infer_error("copy_", {self, make(DType::kInt32, {2, 2, 3}, std::vector<double>(12, 0))}, {}, &msg),
            ErrorCode::kShapeMismatch);
  EXPECT_EQ(msg.rfind("copy_", 0), 0u);
  EXPECT_EQ(infer_error("copy_", {self, make(DType::kInt32, {2}, {1, 2})}), ErrorCode::kShapeMismatch);
}

// ---------------- narrow floats ----------------

uint16_t h(float f) {
  return kernels::f32_to_f16(f);
}
uint16_t bf(float f) {
  return kernels::f32_to_bf16(f);
}

TEST(EwNarrow, RoundOnStore) {
  // float16: 1 + 2^-11 is a tie -> even (1.0); 1 + 3 * 2^-11 rounds up
  auto a = make(DType::kFloat16, {2}, {1, 1});
  auto b = make(DType::kFloat16, {2}, {std::ldexp(1.0, -11), 3 * std::ldexp(1.0, -11)});
  Tensor r = call1("add", {a, b});
  EXPECT_EQ(r.dtype(), DType::kFloat16);
  EXPECT_EQ(r.data_ptr<Half>()[0].bits, h(1.0f));
  EXPECT_EQ(r.data_ptr<Half>()[1].bits, h(1.0f + 4 * std::ldexp(1.0f, -11)));
  // bfloat16 computed in float, rounded once
  auto x = make(DType::kBFloat16, {2}, {1, 3});
  Tensor e = call1("exp", {x});
  EXPECT_EQ(e.dtype(), DType::kBFloat16);
  EXPECT_EQ(e.data_ptr<BFloat16>()[0].bits, bf(std::exp(1.0f)));
  EXPECT_EQ(e.data_ptr<BFloat16>()[1].bits, bf(std::exp(3.0f)));
  // a float16 tensor compared with 0.1: the scalar is rounded to float16 first
  auto t = make(DType::kFloat16, {1}, {0.1});
  expect_values(call1("eq", {t, 0.1}), {1});
  // float16 + wrapped float keeps float16
  EXPECT_EQ(call1("mul", {t, 3.0}).dtype(), DType::kFloat16);
  // float8: 16 + 1 = 17 -> 16 in e4m3 (3 mantissa bits); 3 * 5 = 15 exact
  auto f8 = make(DType::kFloat8E4M3FN, {2}, {16, 3});
  Tensor s = call1("add", {f8, make(DType::kFloat8E4M3FN, {2}, {1, 0})});
  EXPECT_EQ(s.dtype(), DType::kFloat8E4M3FN);
  expect_values(s, {16, 3});
  expect_values(call1("mul", {f8, make(DType::kFloat8E4M3FN, {1}, {5})}), {80, 15});
  // an int32 tensor operand of a float16 op rounds through float16 first:
  // 2049 -> 2048, + 0.5 -> 2048.5 -> 2048 (not 2049.5 -> 2050)
  Tensor m16 = call1("add", {make(DType::kFloat16, {2}, {0.5, 0.5}), make(DType::kInt32, {2}, {2049, 2049})});
  EXPECT_EQ(m16.dtype(), DType::kFloat16);
  expect_values(m16, {2048, 2048});
  // mul/div read a one-element `other` at full precision (PyTorch's opmath
  // scalar): 1.5 * 2049 = 3073.5 -> 3074, not 1.5 * 2048 = 3072
  Tensor s16 = call1("mul", {make(DType::kFloat16, {1}, {1.5}), make(DType::kInt32, {}, {2049})});
  EXPECT_EQ(s16.dtype(), DType::kFloat16);
  expect_values(s16, {3074});
}

TEST(EwNarrow, BulkHalfConversionIsBitExact) {
  // every half -> float
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> f(all.size());
  cpu::f16_to_f32_n(all.data(), f.data(), static_cast<int64_t>(all.size()));
  for (size_t i = 0; i < all.size(); ++i) {
    const float want = kernels::f16_to_f32(all[i]);
    uint32_t a, b;
    std::memcpy(&a, &f[i], 4);
    std::memcpy(&b, &want, 4);
    if (std::isnan(want)) {
      // F16C quiets signalling NaNs (as PyTorch's c10::Half does); sign kept
      ASSERT_TRUE(std::isnan(f[i])) << "half bits " << i;
      ASSERT_EQ(a >> 31, b >> 31) << "half bits " << i;
    } else {
      ASSERT_EQ(a, b) << "half bits " << i;
    }
  }
  // floats -> half: every half boundary +-1ulp, ties, subnormals, overflow, NaN
  std::vector<float> src;
  for (size_t i = 0; i < all.size(); ++i) {
    const float v = f[i];
    src.push_back(v);
    src.push_back(std::nextafter(v, kInf));
    src.push_back(std::nextafter(v, -kInf));
    if (i + 1 < all.size()) src.push_back((f[i] + f[i + 1]) / 2);  // ties
  }
  src.push_back(65520.0f);
  src.push_back(65519.99f);
  src.push_back(1e-8f);
  src.push_back(std::numeric_limits<float>::denorm_min());
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 100000; ++i) {
    const uint32_t u = bits(rng);
    float v;
    std::memcpy(&v, &u, 4);
    src.push_back(v);
  }
  std::vector<uint16_t> h(src.size());
  cpu::f32_to_f16_n(src.data(), h.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(h[i], kernels::f32_to_f16(src[i])) << src[i];
  // bfloat16 both ways
  cpu::f32_to_bf16_n(src.data(), h.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(h[i], kernels::f32_to_bf16(src[i])) << src[i];
  cpu::bf16_to_f32_n(all.data(), f.data(), static_cast<int64_t>(all.size()));
  for (size_t i = 0; i < all.size(); ++i) {
    const float want = kernels::bf16_to_f32(all[i]);
    ASSERT_EQ(std::memcmp(&f[i], &want, 4), 0) << i;
  }
}

// ---------------- engine paths (parallel, casts, broadcasting) ----------------

TEST(EwEngine, LargeParallelMatchesScalarLoop) {
  ThreadPool pool(3);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-10, 10);
  const int64_t rows = 517, cols = 389;  // odd sizes: chunks split rows
  std::vector<double> av(static_cast<size_t>(rows * cols)), bv(static_cast<size_t>(cols)),
      cv(static_cast<size_t>(rows));
  for (auto& v : av) v = u(rng);
  for (auto& v : bv) v = u(rng);
  for (auto& v : cv) v = std::round(u(rng));
  auto a = make(DType::kFloat32, {rows, cols}, av);
  auto b = make(DType::kFloat64, {cols}, bv);             // broadcast row, cast up front
  auto c = make(DType::kInt32, {rows, 1}, cv);            // broadcast column
  auto ai = make(DType::kInt32, {rows, cols}, av);        // full-size cast block by block
  Tensor r1 = test_ew::call1("add", {a, b}, {}, &pool);   // float32 + float64 -> float64
  Tensor r2 = test_ew::call1("mul", {a, c}, {}, &pool);   // float32 * int32 -> float32
  Tensor r3 = test_ew::call1("sub", {ai, a}, {}, &pool);  // int32 - float32 -> float32
  Tensor r4 = test_ew::call1("where", {test_ew::call1("gt", {a, 0}, {}, &pool), a, c}, {}, &pool);
  ASSERT_EQ(r1.dtype(), DType::kFloat64);
  ASSERT_EQ(r2.dtype(), DType::kFloat32);
  ASSERT_EQ(r3.dtype(), DType::kFloat32);
  const float* ap = a.data_ptr<float>();
  const int32_t* aip = ai.data_ptr<int32_t>();
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t k = i * cols + j;
      ASSERT_EQ(r1.data_ptr<double>()[k], static_cast<double>(ap[k]) + bv[static_cast<size_t>(j)]);
      ASSERT_EQ(r2.data_ptr<float>()[k], ap[k] * static_cast<float>(cv[static_cast<size_t>(i)]));
      ASSERT_EQ(r3.data_ptr<float>()[k], static_cast<float>(aip[k]) - ap[k]);
      ASSERT_EQ(r4.data_ptr<float>()[k], ap[k] > 0 ? ap[k] : static_cast<float>(cv[static_cast<size_t>(i)]));
    }
  }
  // unary over the pool
  Tensor e = test_ew::call1("tanh", {a}, {}, &pool);
  for (int64_t k = 0; k < rows * cols; k += 97) {
    ASSERT_EQ(e.data_ptr<float>()[k], static_cast<float>(std::tanh(static_cast<double>(ap[k]))));
  }
}

TEST(EwEngine, EveryOpRegistered) {
  for (const char* op :
       {"add",  "sub",   "mul",  "div",         "pow",        "maximum",     "minimum", "eq",  "ne",   "lt",
        "le",   "gt",    "ge",   "logical_and", "logical_or", "where",       "neg",     "abs", "exp",  "log",
        "sqrt", "rsqrt", "relu", "sigmoid",     "tanh",       "logical_not", "clamp",   "to",  "copy_"}) {
    const OpDef* d = OpRegistry::global().find(op);
    ASSERT_NE(d, nullptr) << op;
    EXPECT_TRUE(d->kernels.count("cpu")) << op;
    EXPECT_FALSE(d->dtypes.empty()) << op;
  }
  EXPECT_EQ(test_ew::op_def("add").signature(), "add(Tensor input, Tensor|Scalar other, *, float alpha=1) -> Tensor");
}

}  // namespace
}  // namespace tensord
