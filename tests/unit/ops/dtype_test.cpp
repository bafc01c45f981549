#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ops/dtype.h"
#include "ops/kernels/float_conv.h"
#include "ops/shape.h"
#include "ops/error.h"

namespace tensord {
namespace {
using namespace kernels;

TEST(DType, NamesTagsAndAliases) {
  for (int i = 0; i < kNumDTypes; ++i) {
    auto t = static_cast<DType>(i);
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
    EXPECT_EQ(dtype_from_safetensors_tag(dtype_safetensors_tag(t)), t);
  }
  EXPECT_EQ(dtype_from_name("FP32"), DType::kFloat32);
  EXPECT_EQ(dtype_from_name("INT64"), DType::kInt64);
  EXPECT_EQ(dtype_from_name("BOOL"), DType::kBool);
  EXPECT_EQ(dtype_from_name("BF16"), DType::kBFloat16);
  EXPECT_EQ(dtype_from_name("torch.float64"), DType::kFloat64);
  EXPECT_EQ(dtype_from_name("float"), DType::kFloat32);
  EXPECT_FALSE(dtype_from_name("float33"));
  EXPECT_FALSE(dtype_from_safetensors_tag("F33"));
  EXPECT_EQ(dtype_size(DType::kComplex128), 16u);
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2u);
}

TEST(DType, PromotionMatchesTorch) {
  // torch.promote_types
  EXPECT_EQ(promote_types(DType::kUInt8, DType::kInt8), DType::kInt16);
  EXPECT_EQ(promote_types(DType::kInt32, DType::kFloat16), DType::kFloat16);
  EXPECT_EQ(promote_types(DType::kFloat16, DType::kBFloat16), DType::kFloat32);
  EXPECT_EQ(promote_types(DType::kBool, DType::kUInt8), DType::kUInt8);
  EXPECT_EQ(promote_types(DType::kInt64, DType::kFloat32), DType::kFloat32);
  EXPECT_EQ(promote_types(DType::kComplex64, DType::kFloat64), DType::kComplex128);
  EXPECT_EQ(promote_types(DType::kComplex64, DType::kInt64), DType::kComplex64);
  EXPECT_EQ(promote_types(DType::kFloat32, DType::kFloat64), DType::kFloat64);
  EXPECT_EQ(promote_types(DType::kInt16, DType::kInt32), DType::kInt32);
  EXPECT_EQ(promote_types(DType::kFloat8E4M3FN, DType::kFloat16), DType::kFloat32);
}

TEST(Shape, NumelOverflowAndBroadcast) {
  EXPECT_EQ(shape_numel({}), 1);
  EXPECT_EQ(shape_numel({2, 0, 5}), 0);
  EXPECT_THROW(shape_numel({int64_t{1} << 40, int64_t{1} << 40}), Error);
  EXPECT_THROW(shape_numel({-1}), Error);
  EXPECT_THROW(shape_numel(Shape(17, 1)), Error);
  EXPECT_EQ(broadcast_shapes({2, 1, 3}, {4, 1}, "t"), (Shape{2, 4, 3}));
  EXPECT_THROW(broadcast_shapes({2, 3}, {4}, "t"), Error);
  EXPECT_EQ(wrap_dim(-1, 3, "t"), 2);
  EXPECT_THROW(wrap_dim(3, 3, "t"), Error);
}

float bits_to_f(uint32_t u) {
  return f32_from_bits(u);
}

TEST(FloatConv, Float16AllCodesRoundTrip) {
  for (uint32_t c = 0; c < 65536; ++c) {
    float f = f16_to_f32(static_cast<uint16_t>(c));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), c) << c;
  }
}

TEST(FloatConv, Float16RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1+2^-10: ties to even (1.0).
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9: rounds up.
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // overflow -> inf
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (0)
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
}

TEST(FloatConv, BFloat16) {
  for (uint32_t c = 0; c < 65536; ++c) {
    float f = bf16_to_f32(static_cast<uint16_t>(c));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), c);
  }
  EXPECT_EQ(f32_to_bf16(bits_to_f(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(bits_to_f(0x3f818000)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(bits_to_f(0x3f808001)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(FloatConv, Float8E4M3FN) {
  for (uint32_t c = 0; c < 256; ++c) {
    float f = e4m3fn_to_f32(static_cast<uint8_t>(c));
    if (std::isnan(f)) {
      EXPECT_EQ(c & 0x7f, 0x7fu);
      continue;
    }
    ASSERT_EQ(f32_to_e4m3fn(f), c) << c;
  }
  EXPECT_EQ(e4m3fn_to_f32(0x7e), 448.0f);
  EXPECT_EQ(f32_to_e4m3fn(1000.0f), 0x7e);    // saturates
  EXPECT_EQ(f32_to_e4m3fn(-INFINITY), 0xfe);  // saturates
  EXPECT_EQ(f32_to_e4m3fn(NAN) & 0x7f, 0x7f);
  EXPECT_EQ(e4m3fn_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(f32_to_e4m3fn(1.0625f), 0x38);               // 1 + 1/16: tie between 1 and 1.125 -> even (1.0)
  EXPECT_EQ(f32_to_e4m3fn(1.1875f), 0x3a);               // tie between 1.125 and 1.25 -> 1.25
}

TEST(FloatConv, Float8E5M2) {
  for (uint32_t c = 0; c < 256; ++c) {
    float f = e5m2_to_f32(static_cast<uint8_t>(c));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_e5m2(f), c) << c;
  }
  EXPECT_EQ(e5m2_to_f32(0x7b), 57344.0f);
  EXPECT_EQ(f32_to_e5m2(1e6f), 0x7b);
  EXPECT_EQ(f32_to_e5m2(INFINITY), 0x7c);
  EXPECT_TRUE(std::isinf(e5m2_to_f32(0xfc)));
}

TEST(FloatConv, Float8E8M0) {
  for (uint32_t c = 0; c < 255; ++c) {
    ASSERT_EQ(f32_to_e8m0(e8m0_to_f32(static_cast<uint8_t>(c))), c) << c;
  }
  EXPECT_TRUE(std::isnan(e8m0_to_f32(0xff)));
  EXPECT_EQ(f32_to_e8m0(1.0f), 127);
  EXPECT_EQ(f32_to_e8m0(1.49f), 127);
  EXPECT_EQ(f32_to_e8m0(1.5f), 128);   // ties round up (c10)
  EXPECT_EQ(f32_to_e8m0(-4.0f), 129);  // sign dropped
  EXPECT_EQ(f32_to_e8m0(INFINITY), 0xff);
  EXPECT_EQ(f32_to_e8m0(NAN), 0xff);
  EXPECT_EQ(f32_to_e8m0(0.0f), 0);
}

}  // namespace
}  // namespace tensord
