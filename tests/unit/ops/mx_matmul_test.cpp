// matmul with an MX operand (ops/cpu/matmul_mx.cpp) against
// dequantize-then-matmul: the result is float32 in the logical shapes'
// matmul shape, each element within float32 rounding of the same full-k dot
// product (the panels only change OpenBLAS's tiling), for an MX left, right
// or both operands, every format, block axes along and across the
// contraction, batches with broadcast, 1-D operands, panel edges (shapes
// larger than one panel), a pool; NaN blocks propagate as NaN. Bad operand
// dtypes are dtype_mismatch, bad shapes shape_mismatch, at infer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/thread_pool.h"
#include "ops/mx_tensor.h"
#include "op_call_util_ew.h"

namespace tensord {
namespace {

using test_ew::call1;
using test_ew::infer_error;

Tensor randn(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  Tensor t = Tensor::empty_host(DType::kFloat32, std::move(shape));
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(nd(rng));
  return t;
}

Tensor quantize(const Tensor& x, const char* fmt, int64_t axis, int64_t bs = 32) {
  Tensor q = call1("mx.quantize", {x, fmt, bs, axis, "rceil"});
  EXPECT_TRUE(q.is_mx());
  return q;
}

Tensor operand_value(const Tensor& t) {
  return t.is_mx() ? call1("mx.dequantize", {t}) : t;
}

// matmul(a, b) with MX operands against matmul(dequantize(a), dequantize(b)):
// same shape and dtype, elementwise within 1e-5 of the sum of |products|
// (float32 reassociation), NaN where the reference is NaN.
void expect_matches_reference(const Tensor& a, const Tensor& b, ThreadPool* pool = nullptr) {
  const Tensor got = test_ew::call("matmul", {a, b}, {}, pool).at(0);
  const Tensor da = operand_value(a), db = operand_value(b);
  const Tensor want = call1("matmul", {da, db});
  // The scale of each element: |A| @ |B|.
  auto abs_of = [](const Tensor& t) { return call1("abs", {t}); };
  const Tensor mag = call1("matmul", {abs_of(da), abs_of(db)});
  ASSERT_EQ(got.dtype(), DType::kFloat32);
  ASSERT_EQ(got.shape(), want.shape());
  const float* g = got.data_ptr<float>();
  const float* w = want.data_ptr<float>();
  const float* s = mag.data_ptr<float>();
  int64_t bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (std::isnan(w[i])) {
      bad += !std::isnan(g[i]);
      continue;
    }
    if (!(std::fabs(g[i] - w[i]) <= 1e-5f * s[i] + 1e-30f)) {
      if (bad < 5) ADD_FAILURE() << "element " << i << ": " << g[i] << " vs " << w[i];
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << shape_str(a.shape()) << " @ " << shape_str(b.shape());
}

const char* const kFormats[] = {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1"};

TEST(MxMatmul, MxRightOperandEveryFormatBothAxes) {
  const Tensor x = randn({5, 64}, 1);
  for (const char* fmt : kFormats) {
    const Tensor w = randn({64, 96}, 2);
    expect_matches_reference(x, quantize(w, fmt, -1));  // blocks along n
    expect_matches_reference(x, quantize(w, fmt, 0));   // blocks along k
  }
}

TEST(MxMatmul, MxLeftOperandAndBoth) {
  for (const char* fmt : {"mxfp8_e4m3", "mxfp4_e2m1", "mxfp6_e3m2"}) {
    const Tensor a = quantize(randn({7, 96}, 3), fmt, -1);
    const Tensor a0 = quantize(randn({64, 96}, 4), fmt, 0);
    const Tensor b = randn({96, 33}, 5);
    expect_matches_reference(a, b);
    expect_matches_reference(a0, b);
    expect_matches_reference(a, quantize(randn({96, 64}, 6), fmt, 0));
    expect_matches_reference(a0, quantize(randn({96, 32}, 7), fmt, -1));
  }
}

TEST(MxMatmul, PanelsLargerThanOneBuffer) {
  // k 2048: a panel is 128 rows / columns, so 300 rows and 320 columns take
  // several panels with ragged last ones; threads split them.
  ThreadPool pool(3);
  const Tensor a = randn({300, 2048}, 8);
  const Tensor w = randn({2048, 320}, 9);
  expect_matches_reference(a, quantize(w, "mxfp8_e4m3", 0), &pool);
  expect_matches_reference(quantize(a, "mxfp4_e2m1", -1), w, &pool);
  expect_matches_reference(quantize(a, "mxfp8_e5m2", -1), quantize(w, "mxfp6_e2m3", -1), &pool);
}

TEST(MxMatmul, BatchesBroadcastAndVectors) {
  const Tensor a = randn({2, 3, 4, 64}, 10);
  const Tensor w = randn({64, 32}, 11);
  expect_matches_reference(a, quantize(w, "mxfp8_e4m3", 0));                            // shared weight
  expect_matches_reference(a, quantize(randn({3, 64, 32}, 12), "mxfp4_e2m1", -1));      // broadcast batch
  expect_matches_reference(quantize(a, "mxfp8_e5m2", 0, 2), randn({1, 3, 64, 5}, 13));  // blocks across a batch dim
  expect_matches_reference(quantize(randn({64}, 14), "mxfp4_e2m1", 0), w);              // 1-D @ 2-D
  expect_matches_reference(a, quantize(randn({64}, 15), "mxfp6_e3m2", 0));              // 2-D @ 1-D
  expect_matches_reference(quantize(randn({64}, 16), "mxfp8_e4m3", 0), randn({64}, 17));
}

TEST(MxMatmul, NanBlockGivesNanOnlyWhereItContributes) {
  Tensor w = randn({64, 64}, 18);
  w.data_ptr<float>()[3 * 64 + 40] = std::nanf("");  // row 3, block of columns 32..63
  const Tensor q = quantize(w, "mxfp8_e4m3", -1);
  const Tensor x = randn({2, 64}, 19);
  expect_matches_reference(x, q);
  const Tensor got = call1("matmul", {x, q});
  EXPECT_TRUE(std::isnan(got.data_ptr<float>()[40]));
  EXPECT_FALSE(std::isnan(got.data_ptr<float>()[10]));
}

TEST(MxMatmul, ResultMetaAndRefusals) {
  const Tensor q = quantize(randn({64, 32}, 20), "mxfp8_e4m3", 0);
  const auto metas = test_ew::infer("matmul", {randn({3, 64}, 21), q});
  ASSERT_EQ(metas.size(), 1u);
  EXPECT_EQ(metas[0].dtype, DType::kFloat32);
  EXPECT_EQ(metas[0].shape, (Shape{3, 32}));
  EXPECT_FALSE(metas[0].mx);
  std::string msg;
  const Tensor x64 = test_ew::make(DType::kFloat64, {3, 64}, std::vector<double>(192, 1.0));
  EXPECT_EQ(infer_error("matmul", {x64, q}, {}, &msg), ErrorCode::kDtypeMismatch);
  EXPECT_NE(msg.find("float32"), std::string::npos) << msg;
  const Tensor x16 = test_ew::make(DType::kFloat16, {32, 3}, std::vector<double>(96, 1.0));
  EXPECT_EQ(infer_error("matmul", {q, x16}, {}), ErrorCode::kDtypeMismatch);
  EXPECT_EQ(infer_error("matmul", {randn({3, 63}, 22), q}, {}), ErrorCode::kShapeMismatch);
  EXPECT_EQ(infer_error("matmul", {q, randn({31, 2}, 23)}, {}), ErrorCode::kShapeMismatch);
  // Zero-size: the empty sum.
  const Tensor z = call1("matmul", {randn({0, 64}, 24), q});
  EXPECT_EQ(z.shape(), (Shape{0, 32}));
}

}  // namespace
}  // namespace tensord
