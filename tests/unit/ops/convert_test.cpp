#include "ops/convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/dtype.h"

namespace tensord {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

template <class D, class S>
std::vector<D> conv(const std::vector<S>& src, DType st, DType dt) {
  std::vector<D> out(src.size());
  convert_elements(src.data(), st, out.data(), dt, static_cast<int64_t>(src.size()));
  return out;
}

std::vector<uint16_t> to_bits16(const std::vector<float>& v, DType dt) {
  return conv<uint16_t>(v, DType::kFloat32, dt);
}
std::vector<uint8_t> to_bits8(const std::vector<float>& v, DType dt) {
  return conv<uint8_t>(v, DType::kFloat32, dt);
}

TEST(Convert, Bfloat16RoundsToNearestEven) {
  const float one = 1.0f;
  const float tie_down = 1.0f + std::ldexp(1.0f, -8);    // halfway 0x3F80..0x3F81: even is 0x3F80
  const float tie_up = 1.0f + 3 * std::ldexp(1.0f, -8);  // halfway 0x3F81..0x3F82: even is 0x3F82
  const float above = 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20);
  auto b = to_bits16({one, tie_down, tie_up, above, -tie_up, kInf, -kInf}, DType::kBFloat16);
  EXPECT_EQ(b[0], 0x3F80);
  EXPECT_EQ(b[1], 0x3F80);
  EXPECT_EQ(b[2], 0x3F82);
  EXPECT_EQ(b[3], 0x3F81);
  EXPECT_EQ(b[4], 0xBF82);
  EXPECT_EQ(b[5], 0x7F80);
  EXPECT_EQ(b[6], 0xFF80);
  auto n = to_bits16({kNaN}, DType::kBFloat16);
  EXPECT_EQ(n[0] & 0x7F80, 0x7F80);
  EXPECT_NE(n[0] & 0x007F, 0);
}

TEST(Convert, Float16RoundsToNearestEvenAndOverflows) {
  const float tie_down = 1.0f + std::ldexp(1.0f, -11);
  const float tie_up = 1.0f + 3 * std::ldexp(1.0f, -11);
  auto h = to_bits16({1.0f, tie_down, tie_up, 65504.0f, 65519.0f, 65520.0f, 1e9f, -1e9f, std::ldexp(1.0f, -24),
                      std::ldexp(1.0f, -25), std::ldexp(1.5f, -25), -0.0f},
                     DType::kFloat16);
  EXPECT_EQ(h[0], 0x3C00);
  EXPECT_EQ(h[1], 0x3C00);
  EXPECT_EQ(h[2], 0x3C02);
  EXPECT_EQ(h[3], 0x7BFF);
  EXPECT_EQ(h[4], 0x7BFF);  // below the halfway point to 65536
  EXPECT_EQ(h[5], 0x7C00);  // halfway rounds to even = infinity
  EXPECT_EQ(h[6], 0x7C00);
  EXPECT_EQ(h[7], 0xFC00);
  EXPECT_EQ(h[8], 0x0001);  // smallest subnormal
  EXPECT_EQ(h[9], 0x0000);  // tie with 0 rounds to even (0)
  EXPECT_EQ(h[10], 0x0001);
  EXPECT_EQ(h[11], 0x8000);
}

TEST(Convert, Float8E4M3FNSaturatesAndKeepsNaN) {
  auto b = to_bits8({448.0f, 464.0f, 1000.0f, kInf, -kInf, -1000.0f, kNaN, 1.0f, std::ldexp(1.0f, -9), 0.0f},
                    DType::kFloat8E4M3FN);
  EXPECT_EQ(b[0], 0x7E);
  EXPECT_EQ(b[1], 0x7E);
  EXPECT_EQ(b[2], 0x7E);
  EXPECT_EQ(b[3], 0x7E);
  EXPECT_EQ(b[4], 0xFE);
  EXPECT_EQ(b[5], 0xFE);
  EXPECT_EQ(b[6] & 0x7F, 0x7F);
  EXPECT_EQ(b[7], 0x38);
  EXPECT_EQ(b[8], 0x01);  // smallest subnormal 2^-9
  EXPECT_EQ(b[9], 0x00);
  // Back to float.
  std::vector<uint8_t> codes = {0x7E, 0xFE, 0x7F, 0x01, 0x38};
  auto f = conv<float>(codes, DType::kFloat8E4M3FN, DType::kFloat32);
  EXPECT_EQ(f[0], 448.0f);
  EXPECT_EQ(f[1], -448.0f);
  EXPECT_TRUE(std::isnan(f[2]));
  EXPECT_EQ(f[3], std::ldexp(1.0f, -9));
  EXPECT_EQ(f[4], 1.0f);
}

TEST(Convert, Float8E5M2SaturatesFiniteKeepsInf) {
  auto b = to_bits8({57344.0f, 1e6f, kInf, -kInf, kNaN, 1.0f, -2.0f}, DType::kFloat8E5M2);
  EXPECT_EQ(b[0], 0x7B);
  EXPECT_EQ(b[1], 0x7B);
  EXPECT_EQ(b[2], 0x7C);
  EXPECT_EQ(b[3], 0xFC);
  EXPECT_GT(b[4] & 0x7F, 0x7C);
  EXPECT_EQ(b[5], 0x3C);
  EXPECT_EQ(b[6], 0xC0);
  auto f = conv<float>(std::vector<uint8_t>{0x7C, 0xFC, 0x7D, 0x7B}, DType::kFloat8E5M2, DType::kFloat32);
  EXPECT_EQ(f[0], kInf);
  EXPECT_EQ(f[1], -kInf);
  EXPECT_TRUE(std::isnan(f[2]));
  EXPECT_EQ(f[3], 57344.0f);
}

TEST(Convert, Float8E8M0) {
  auto b = to_bits8({1.0f, 1.5f, 1.49f, 2.0f, -4.0f, 0.0f, kNaN, kInf, 3e38f, std::ldexp(1.0f, -127)},
                    DType::kFloat8E8M0FNU);
  EXPECT_EQ(b[0], 127);
  EXPECT_EQ(b[1], 128);  // ties round up (c10::Float8_e8m0fnu)
  EXPECT_EQ(b[2], 127);
  EXPECT_EQ(b[3], 128);
  EXPECT_EQ(b[4], 129);  // sign dropped
  EXPECT_EQ(b[5], 0);
  EXPECT_EQ(b[6], 0xFF);
  EXPECT_EQ(b[7], 0xFF);
  EXPECT_EQ(b[8], 0xFF);  // 3e38 rounds to 2^128: overflow
  EXPECT_EQ(b[9], 0);
  auto f = conv<float>(std::vector<uint8_t>{0, 127, 130, 0xFF}, DType::kFloat8E8M0FNU, DType::kFloat32);
  EXPECT_EQ(f[0], std::ldexp(1.0f, -127));
  EXPECT_EQ(f[1], 1.0f);
  EXPECT_EQ(f[2], 8.0f);
  EXPECT_TRUE(std::isnan(f[3]));
}

TEST(Convert, FloatToIntTruncatesSaturatesAndZeroesNaN) {
  std::vector<float> v = {2.9f, -2.9f, kNaN, 1e10f, -1e10f, kInf, -kInf, -0.5f, 0.0f};
  auto i32 = conv<int32_t>(v, DType::kFloat32, DType::kInt32);
  EXPECT_EQ(i32,
            (std::vector<int32_t>{2, -2, 0, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(),
                                  std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), 0, 0}));
  std::vector<double> d8 = {127.9, 128.0, 200.5, -128.9, -129.0, -1e300};
  auto i8 = conv<int8_t>(d8, DType::kFloat64, DType::kInt8);
  EXPECT_EQ(i8, (std::vector<int8_t>{127, 127, 127, -128, -128, -128}));
  std::vector<double> du = {-1.5, -0.9, 255.9, 256.0, 3.7};
  auto u8 = conv<uint8_t>(du, DType::kFloat64, DType::kUInt8);
  EXPECT_EQ(u8, (std::vector<uint8_t>{0, 0, 255, 255, 3}));
  std::vector<double> d64 = {9.3e18, -9.3e18, -9223372036854775808.0, 9223372036854775808.0, 1e15 + 0.5, std::nan("")};
  auto i64 = conv<int64_t>(d64, DType::kFloat64, DType::kInt64);
  EXPECT_EQ(i64[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64[1], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(i64[2], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(i64[3], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64[4], 1000000000000000);
  EXPECT_EQ(i64[5], 0);
  // Narrow floats go through the same rule.
  auto h = to_bits16({-3.75f, 70000.0f}, DType::kFloat16);  // -3.75, inf
  auto hi = conv<int16_t>(h, DType::kFloat16, DType::kInt16);
  EXPECT_EQ(hi[0], -3);
  EXPECT_EQ(hi[1], std::numeric_limits<int16_t>::max());
}

TEST(Convert, IntToIntWraps) {
  std::vector<int64_t> v = {300, -1, 128, -129};
  EXPECT_EQ(conv<int8_t>(v, DType::kInt64, DType::kInt8), (std::vector<int8_t>{44, -1, -128, 127}));
  EXPECT_EQ(conv<uint8_t>(v, DType::kInt64, DType::kUInt8), (std::vector<uint8_t>{44, 255, 128, 127}));
  std::vector<uint8_t> u = {255, 0};
  EXPECT_EQ(conv<int32_t>(u, DType::kUInt8, DType::kInt32), (std::vector<int32_t>{255, 0}));
}

TEST(Convert, ToBoolIsNonZero) {
  std::vector<float> f = {0.0f, -0.0f, kNaN, 0.1f, -kInf};
  EXPECT_EQ(conv<uint8_t>(f, DType::kFloat32, DType::kBool), (std::vector<uint8_t>{0, 0, 1, 1, 1}));
  std::vector<std::complex<float>> c = {{0, 0}, {0, 1}, {2, 0}, {0, -0.0f}};
  EXPECT_EQ(conv<uint8_t>(c, DType::kComplex64, DType::kBool), (std::vector<uint8_t>{0, 1, 1, 0}));
  std::vector<int32_t> i = {0, 2, -7};
  EXPECT_EQ(conv<uint8_t>(i, DType::kInt32, DType::kBool), (std::vector<uint8_t>{0, 1, 1}));
  // A stray bool byte reads as true and converts to exactly 1.
  std::vector<uint8_t> b = {0, 1, 2, 255};
  EXPECT_EQ(conv<int32_t>(b, DType::kBool, DType::kInt32), (std::vector<int32_t>{0, 1, 1, 1}));
  EXPECT_EQ(conv<float>(b, DType::kBool, DType::kFloat32), (std::vector<float>{0, 1, 1, 1}));
}

TEST(Convert, ComplexToRealTakesRealPart) {
  std::vector<std::complex<double>> c = {{3.75, -2}, {-1e300, 5}, {std::nan(""), 1}};
  auto f = conv<float>(c, DType::kComplex128, DType::kFloat32);
  EXPECT_EQ(f[0], 3.75f);
  EXPECT_EQ(f[1], -kInf);
  EXPECT_TRUE(std::isnan(f[2]));
  auto i = conv<int32_t>(c, DType::kComplex128, DType::kInt32);
  EXPECT_EQ(i, (std::vector<int32_t>{3, std::numeric_limits<int32_t>::min(), 0}));
  auto c64 = conv<std::complex<float>>(c, DType::kComplex128, DType::kComplex64);
  EXPECT_EQ(c64[0], std::complex<float>(3.75f, -2.0f));
  EXPECT_EQ(c64[1].imag(), 5.0f);
  auto bf = conv<uint16_t>(c, DType::kComplex128, DType::kBFloat16);
  EXPECT_EQ(bf[0], 0x4070);  // 3.75
  std::vector<float> r = {1.5f, -2.0f};
  auto rc = conv<std::complex<double>>(r, DType::kFloat32, DType::kComplex128);
  EXPECT_EQ(rc[0], std::complex<double>(1.5, 0));
  EXPECT_EQ(rc[1], std::complex<double>(-2.0, 0));
}

TEST(Convert, DoubleToNarrowGoesThroughFloat) {
  // Just above the float16 halfway point 1 + 2^-11 by less than float32 can
  // hold: float32 rounds to the tie, float16 then rounds to even (1.0), as
  // c10::Half(double) does.
  std::vector<double> d = {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)};
  EXPECT_EQ(conv<uint16_t>(d, DType::kFloat64, DType::kFloat16)[0], 0x3C00);
  // A value float32 keeps exactly rounds once.
  std::vector<double> d2 = {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -20)};
  EXPECT_EQ(conv<uint16_t>(d2, DType::kFloat64, DType::kFloat16)[0], 0x3C01);
}

TEST(Convert, EveryPairConvertsOneToOne) {
  for (int s = 0; s < kNumDTypes; ++s) {
    for (int d = 0; d < kNumDTypes; ++d) {
      DType st = static_cast<DType>(s), dt = static_cast<DType>(d);
      alignas(16) unsigned char src[3 * 16] = {};
      alignas(16) unsigned char dst[3 * 16] = {};
      for (int i = 0; i < 3; ++i) store_from_double(st, src, i, 1.0);
      convert_elements(src, st, dst, dt, 3);
      for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(load_as_double(dt, dst, i), 1.0) << dtype_name(st) << " -> " << dtype_name(dt);
        EXPECT_EQ(load_as_complex(dt, dst, i), std::complex<double>(1.0, 0.0));
      }
    }
  }
}

TEST(Convert, SameDtypeCopiesAndZeroCountIsNoop) {
  std::vector<int64_t> a = {1, 2, 3}, b = {0, 0, 0};
  convert_elements(a.data(), DType::kInt64, b.data(), DType::kInt64, 3);
  EXPECT_EQ(a, b);
  convert_elements(a.data(), DType::kInt64, a.data(), DType::kInt64, 3);  // in place
  EXPECT_EQ(a, (std::vector<int64_t>{1, 2, 3}));
  std::vector<float> c = {7.0f};
  convert_elements(a.data(), DType::kInt64, c.data(), DType::kFloat32, 0);
  EXPECT_EQ(c[0], 7.0f);
}

TEST(Convert, UnalignedBuffers) {
  alignas(8) unsigned char src[1 + 4 * 4];
  alignas(8) unsigned char dst[1 + 8 * 4];
  for (int i = 0; i < 4; ++i) {
    float f = static_cast<float>(i) + 0.5f;
    std::memcpy(src + 1 + 4 * i, &f, 4);
  }
  convert_elements(src + 1, DType::kFloat32, dst + 1, DType::kFloat64, 4);
  for (int i = 0; i < 4; ++i) {
    double d;
    std::memcpy(&d, dst + 1 + 8 * i, 8);
    EXPECT_EQ(d, i + 0.5);
  }
}

TEST(Convert, LoadAndStoreScalars) {
  alignas(16) unsigned char buf[64] = {};
  store_from_double(DType::kInt8, buf, 0, 1e9);
  EXPECT_EQ(load_as_double(DType::kInt8, buf, 0), 127.0);
  store_from_double(DType::kUInt8, buf, 1, -3.0);
  EXPECT_EQ(load_as_double(DType::kUInt8, buf, 1), 0.0);
  store_from_double(DType::kBFloat16, buf, 1, 1.0 + std::ldexp(1.0, -8));
  EXPECT_EQ(load_as_double(DType::kBFloat16, buf, 1), 1.0);
  store_from_complex(DType::kFloat64, buf, 1, {2.5, 9.0});
  EXPECT_EQ(load_as_double(DType::kFloat64, buf, 1), 2.5);
  store_from_complex(DType::kComplex64, buf, 2, {2.5, -9.0});
  EXPECT_EQ(load_as_complex(DType::kComplex64, buf, 2), std::complex<double>(2.5, -9.0));
  EXPECT_EQ(load_as_double(DType::kComplex64, buf, 2), 2.5);
  store_from_double(DType::kBool, buf, 5, std::nan(""));
  EXPECT_EQ(buf[5], 1);
  store_from_complex(DType::kBool, buf, 6, {0.0, 0.0});
  EXPECT_EQ(buf[6], 0);
  store_from_double(DType::kFloat8E4M3FN, buf, 7, 1e6);
  EXPECT_EQ(buf[7], 0x7E);
  EXPECT_EQ(load_as_double(DType::kFloat8E4M3FN, buf, 7), 448.0);
}

}  // namespace
}  // namespace tensord
