// full zeros ones arange rand randn, and the Philox generator.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>

#include "ops/kernels/float_conv.h"
#include "ops/kernels/philox.h"
#include "op_call_util_shape.h"

namespace tensord::shape_test {
namespace {

using IntList = std::vector<int64_t>;

TEST(CreationPhilox, KnownAnswers) {
  // Random123's kat_vectors for philox4x32_10.
  auto r = kernels::philox4x32_10(kernels::Philox4x32{{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
  r = kernels::philox4x32_10(kernels::Philox4x32{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu,
                             0xffffffffu);
  EXPECT_EQ(r.v[0], 0x408f276du);
  EXPECT_EQ(r.v[1], 0x41c83b0eu);
  EXPECT_EQ(r.v[2], 0xa20bc7c6u);
  EXPECT_EQ(r.v[3], 0x6d5451fdu);
  r = kernels::philox4x32_10(kernels::Philox4x32{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u,
                             0x299f31d0u);
  EXPECT_EQ(r.v[0], 0xd16cfe09u);
  EXPECT_EQ(r.v[1], 0x94fdccebu);
  EXPECT_EQ(r.v[2], 0x5001e420u);
  EXPECT_EQ(r.v[3], 0x24126ea1u);
}

TEST(CreationFull, InfersDtypeFromValue) {
  Tensor f = run1("full", {Attr(IntList{2, 3}), Attr(1.5)});
  EXPECT_EQ(f.dtype(), DType::kFloat32);
  EXPECT_EQ(f.shape(), (Shape{2, 3}));
  EXPECT_EQ(values<float>(f), std::vector<float>(6, 1.5f));
  Tensor i = run1("full", {Attr(IntList{4}), Attr(int64_t{7})});
  EXPECT_EQ(i.dtype(), DType::kInt64);
  EXPECT_EQ(values<int64_t>(i), std::vector<int64_t>(4, 7));
  Tensor b = run1("full", {Attr(IntList{2}), Attr(true)});
  EXPECT_EQ(b.dtype(), DType::kBool);
  EXPECT_EQ(values<uint8_t>(b), (std::vector<uint8_t>{1, 1}));
  // Exact large int64.
  Tensor big = run1("full", {Attr(IntList{1}), Attr(int64_t{(int64_t{1} << 60) + 1})});
  EXPECT_EQ(values<int64_t>(big)[0], (int64_t{1} << 60) + 1);
  // Scalars and a single-int size.
  EXPECT_EQ(run1("full", {Attr(IntList{}), Attr(2.0)}).shape(), (Shape{}));
  EXPECT_EQ(run1("full", {Attr(int64_t{3}), Attr(2.0)}).shape(), (Shape{3}));
}

TEST(CreationFull, ExplicitDtypes) {
  Tensor h = run1("full", {Attr(IntList{2}), Attr(1.5)}, {{"dtype", Attr("float16")}});
  EXPECT_EQ(h.dtype(), DType::kFloat16);
  EXPECT_EQ(values<uint16_t>(h), (std::vector<uint16_t>{0x3e00, 0x3e00}));
  Tensor c = run1("full", {Attr(IntList{2}), Attr(2.0)}, {{"dtype", Attr("complex128")}});
  EXPECT_EQ(values<std::complex<double>>(c), (std::vector<std::complex<double>>{{2, 0}, {2, 0}}));
  Tensor u = run1("full", {Attr(IntList{3}), Attr(int64_t{255})}, {{"dtype", Attr("uint8")}});
  EXPECT_EQ(values<uint8_t>(u), (std::vector<uint8_t>{255, 255, 255}));
  Tensor t = run1("full", {Attr(IntList{1}), Attr(-2.7)}, {{"dtype", Attr("int32")}});
  EXPECT_EQ(values<int32_t>(t)[0], -2);  // truncates toward zero
  Tensor d = run1("full", {Attr(IntList{1}), Attr(0.1)}, {{"dtype", Attr("float64")}});
  EXPECT_EQ(values<double>(d)[0], 0.1);
  Tensor n = run1("full", {Attr(IntList{1}), Attr(std::nan(""))});
  EXPECT_TRUE(std::isnan(values<float>(n)[0]));
}

TEST(CreationFull, Errors) {
  EXPECT_EQ(error_of("full", {Attr(IntList{-1}), Attr(1.0)}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("full", {Attr(IntList{1}), Attr(int64_t{256})}, {{"dtype", Attr("uint8")}}),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("full", {Attr(IntList{1}), Attr(1e300)}, {{"dtype", Attr("float32")}}),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("full", {Attr(IntList{1}), Attr(1.0)}, {{"dtype", Attr("nope")}}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("full", {Attr(IntList{int64_t{1} << 30, int64_t{1} << 30}), Attr(1.0)}),
            ErrorCode::kInvalidArgument);
}

TEST(CreationZerosOnes, ShapesAndDtypes) {
  Tensor z = run1("zeros", {Attr(IntList{2, 3})});
  EXPECT_EQ(z.dtype(), DType::kFloat32);
  EXPECT_EQ(values<float>(z), std::vector<float>(6, 0.0f));
  Tensor o = run1("ones", {Attr(IntList{5})}, {{"dtype", Attr("int64")}});
  EXPECT_EQ(values<int64_t>(o), std::vector<int64_t>(5, 1));
  Tensor ob = run1("ones", {Attr(IntList{2})}, {{"dtype", Attr("bfloat16")}});
  EXPECT_EQ(values<uint16_t>(ob), (std::vector<uint16_t>{0x3f80, 0x3f80}));
  Tensor oc = run1("ones", {Attr(IntList{1})}, {{"dtype", Attr("complex64")}});
  EXPECT_EQ(values<std::complex<float>>(oc)[0], std::complex<float>(1, 0));
  EXPECT_EQ(run1("zeros", {Attr(IntList{0, 4})}).shape(), (Shape{0, 4}));
  ThreadPool pool(4);
  Tensor big = run1("ones", {Attr(IntList{1000, 1001})}, {}, &pool);
  for (float v : values<float>(big)) ASSERT_EQ(v, 1.0f);
  EXPECT_EQ(error_of("zeros", {Attr(IntList{2, -3})}), ErrorCode::kInvalidArgument);
}

TEST(CreationArange, LengthsAndDtypes) {
  Tensor a = run1("arange", {Attr(int64_t{5})});
  EXPECT_EQ(a.dtype(), DType::kInt64);
  EXPECT_EQ(values<int64_t>(a), (IntList{0, 1, 2, 3, 4}));
  EXPECT_EQ(values<int64_t>(run1("arange", {Attr(int64_t{2}), Attr(int64_t{11}), Attr(int64_t{3})})),
            (IntList{2, 5, 8}));
  EXPECT_EQ(values<int64_t>(run1("arange", {Attr(int64_t{5}), Attr(int64_t{-1}), Attr(int64_t{-2})})),
            (IntList{5, 3, 1}));
  EXPECT_EQ(run1("arange", {Attr(int64_t{3}), Attr(int64_t{3})}).shape(), (Shape{0}));
  Tensor f = run1("arange", {Attr(0.0), Attr(1.0), Attr(0.25)});
  EXPECT_EQ(f.dtype(), DType::kFloat32);
  EXPECT_EQ(values<float>(f), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  // Any float argument makes the result float32; length is ceil((end - start) / step).
  Tensor g = run1("arange", {Attr(int64_t{0}), Attr(int64_t{1}), Attr(0.3)});
  EXPECT_EQ(g.dtype(), DType::kFloat32);
  EXPECT_EQ(g.shape(), (Shape{4}));
  Tensor d = run1("arange", {Attr(int64_t{4})}, {{"dtype", Attr("float64")}});
  EXPECT_EQ(values<double>(d), (std::vector<double>{0, 1, 2, 3}));
  Tensor i8 = run1("arange", {Attr(int64_t{-2}), Attr(int64_t{2})}, {{"dtype", Attr("int8")}});
  EXPECT_EQ(values<int8_t>(i8), (std::vector<int8_t>{-2, -1, 0, 1}));
  Tensor h = run1("arange", {Attr(int64_t{3})}, {{"dtype", Attr("float16")}});
  EXPECT_EQ(values<uint16_t>(h), (std::vector<uint16_t>{0x0000, 0x3c00, 0x4000}));
  // Extreme int64 bounds do not overflow the length computation.
  Tensor e = run1("arange", {Attr(int64_t{-9223372036854775807 - 1}), Attr(int64_t{9223372036854775807}),
                             Attr(int64_t{4611686018427387904})});
  EXPECT_EQ(values<int64_t>(e), (IntList{-9223372036854775807 - 1, -4611686018427387904, 0, 4611686018427387904}));
}

TEST(CreationArange, LargeParallel) {
  ThreadPool pool(4);
  Tensor a = run1("arange", {Attr(int64_t{300000})}, {}, &pool);
  const auto v = values<int64_t>(a);
  for (int64_t i = 0; i < 300000; ++i) ASSERT_EQ(v[static_cast<size_t>(i)], i);
}

TEST(CreationArange, Errors) {
  EXPECT_EQ(error_of("arange", {Attr(int64_t{0}), Attr(int64_t{5}), Attr(int64_t{0})}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("arange", {Attr(0.0), Attr(1.0), Attr(0.0)}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("arange", {Attr(int64_t{0}), Attr(int64_t{5}), Attr(int64_t{-1})}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("arange", {Attr(int64_t{0}), Attr(int64_t{1} << 60)}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("arange", {Attr(0.0), Attr(1e300), Attr(1e-300)}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("arange", {Attr(0.0), Attr(std::nan(""))}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("arange", {Attr(int64_t{3})}, {{"dtype", Attr("bool")}}), ErrorCode::kDtypeMismatch);
  EXPECT_EQ(error_of("arange", {Attr(int64_t{3})}, {{"dtype", Attr("complex64")}}), ErrorCode::kDtypeMismatch);
}

template <class T>
std::vector<T> seeded(const char* op, const IntList& size, const char* dtype, int64_t seed, ThreadPool* pool) {
  Tensor t = run1(op, {Attr(size)}, {{"dtype", Attr(dtype)}, {"seed", Attr(seed)}}, pool);
  return values<T>(t);
}

TEST(CreationRandom, SeededIsDeterministicAcrossThreadCounts) {
  ThreadPool pool4(4), pool3(3);
  for (const char* op : {"rand", "randn"}) {
    for (const char* dt : {"float32", "complex64"}) {
      auto a = seeded<uint32_t>(op, {1001, 37}, dt, 42, nullptr);  // compare bits
      EXPECT_EQ(a, (seeded<uint32_t>(op, {1001, 37}, dt, 42, &pool4))) << op << " " << dt;
      EXPECT_EQ(a, (seeded<uint32_t>(op, {37, 1001}, dt, 42, &pool3))) << op << " " << dt;
      EXPECT_NE(a, (seeded<uint32_t>(op, {1001, 37}, dt, 43, nullptr))) << op << " " << dt;
    }
    for (const char* dt : {"float64", "complex128"}) {
      auto a = seeded<uint64_t>(op, {333, 77}, dt, -5, nullptr);
      EXPECT_EQ(a, (seeded<uint64_t>(op, {333, 77}, dt, -5, &pool4))) << op << " " << dt;
    }
    for (const char* dt : {"float16", "bfloat16"}) {
      auto a = seeded<uint16_t>(op, {5003}, dt, 7, nullptr);
      EXPECT_EQ(a, (seeded<uint16_t>(op, {5003}, dt, 7, &pool3))) << op << " " << dt;
    }
    // A prefix of a longer draw is the shorter draw: element i depends only
    // on (seed, i).
    auto longer = seeded<uint32_t>(op, {1000}, "float32", 9, nullptr);
    auto shorter = seeded<uint32_t>(op, {7}, "float32", 9, nullptr);
    EXPECT_EQ(std::vector<uint32_t>(longer.begin(), longer.begin() + 7), shorter) << op;
  }
}

TEST(CreationRandom, UnseededDiffers) {
  auto a = values<float>(run1("rand", {Attr(IntList{64})}));
  auto b = values<float>(run1("rand", {Attr(IntList{64})}));
  EXPECT_NE(a, b);
}

template <class T>
void moments(const std::vector<T>& v, double* mean, double* sd, double* lo, double* hi) {
  double s = 0, s2 = 0;
  *lo = 1e300;
  *hi = -1e300;
  for (T x : v) {
    const auto d = static_cast<double>(x);
    s += d;
    s2 += d * d;
    *lo = std::min(*lo, d);
    *hi = std::max(*hi, d);
  }
  *mean = s / static_cast<double>(v.size());
  *sd = std::sqrt(s2 / static_cast<double>(v.size()) - *mean * *mean);
}

TEST(CreationRandom, RandIsUniformInUnitInterval) {
  double mean, sd, lo, hi;
  moments(seeded<float>("rand", {200000}, "float32", 1, nullptr), &mean, &sd, &lo, &hi);
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_NEAR(mean, 0.5, 0.01);
  EXPECT_NEAR(sd, std::sqrt(1.0 / 12.0), 0.01);
  moments(seeded<double>("rand", {200000}, "float64", 2, nullptr), &mean, &sd, &lo, &hi);
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_NEAR(mean, 0.5, 0.01);
  // Narrow floats never round up to 1.
  for (const char* dt : {"float16", "bfloat16"}) {
    for (uint16_t bits : seeded<uint16_t>("rand", {100000}, dt, 3, nullptr)) {
      const float f = std::string(dt) == "float16" ? kernels::f16_to_f32(bits) : kernels::bf16_to_f32(bits);
      ASSERT_GE(f, 0.0f);
      ASSERT_LT(f, 1.0f);
    }
  }
}

TEST(CreationRandom, RandnIsStandardNormal) {
  double mean, sd, lo, hi;
  moments(seeded<float>("randn", {200000}, "float32", 11, nullptr), &mean, &sd, &lo, &hi);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sd, 1.0, 0.01);
  EXPECT_LT(lo, -3.5);
  EXPECT_GT(hi, 3.5);
  moments(seeded<double>("randn", {200000}, "float64", 12, nullptr), &mean, &sd, &lo, &hi);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sd, 1.0, 0.01);
  // Complex: real and imaginary parts each have variance 1/2.
  auto c = seeded<float>("randn", {100000}, "complex64", 13, nullptr);  // interleaved re, im
  moments(c, &mean, &sd, &lo, &hi);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sd * sd, 0.5, 0.01);
  for (float x : c) ASSERT_TRUE(std::isfinite(x));
}

TEST(CreationRandom, ShapesAndErrors) {
  EXPECT_EQ(run1("randn", {Attr(IntList{2, 0, 3})}).shape(), (Shape{2, 0, 3}));
  EXPECT_EQ(run1("rand", {Attr(IntList{})}).shape(), (Shape{}));
  EXPECT_EQ(run1("rand", {Attr(int64_t{4})}).dtype(), DType::kFloat32);
  EXPECT_EQ(error_of("rand", {Attr(IntList{2})}, {{"dtype", Attr("int64")}}), ErrorCode::kDtypeMismatch);
  EXPECT_EQ(error_of("randn", {Attr(IntList{2})}, {{"dtype", Attr("bool")}}), ErrorCode::kDtypeMismatch);
  EXPECT_EQ(error_of("randn", {Attr(IntList{-2})}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("randn", {Attr(IntList{2})}, {{"seed", Attr("x")}}), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace tensord::shape_test
