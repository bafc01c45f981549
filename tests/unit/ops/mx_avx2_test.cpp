// The AVX2 MX quantize loops (ops/cpu/mx_quantize_avx2.cpp) against the
// portable loop (ops/cpu/mx_loop.cpp, itself checked against the spec
// reference in mx_test.cpp): the same element and scale bytes, for every
// format, both scale roundings, float32/float16/bfloat16 inputs, contiguous
// and strided axes, over random float bit patterns (NaN, Inf, subnormals),
// blocks built to hit rounding ties, saturation, zero / -0 blocks, amax near
// the float32 maximum and below the smallest normal. Skips where the CPU has
// no AVX2 + FMA + F16C.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/mx_loop.h"
#include "ops/cpu/mx_quantize_avx2.h"
#include "ops/cpu/thread_pool.h"
#include "ops/kernels/float_conv.h"
#include "ops/mx_tensor.h"

namespace tensord {
namespace {

using kernels::MxFormat;
using kernels::MxScaleRounding;

const MxFormat kFormats[] = {MxFormat::kFp8E4M3, MxFormat::kFp8E5M2, MxFormat::kFp6E2M3, MxFormat::kFp6E3M2,
                             MxFormat::kFp4E2M1};

// float32 values, one kind of block at a time (each block of `bs` values
// along the run gets one kind), so both typical and edge blocks occur.
std::vector<float> make_values(int64_t n, int64_t bs, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> bits;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> kind_d(0, 9);
  std::uniform_int_distribution<int> exp_d(-149, 127);
  std::uniform_int_distribution<int> small_int(-64, 64);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; b += bs) {
    const int kind = kind_d(rng);
    const int e = exp_d(rng);
    for (int64_t i = b; i < b + bs && i < n; ++i) {
      float x = 0.0f;
      switch (kind) {
        case 0:  // any bit pattern: NaN and Inf in about one block in nine
          x = kernels::f32_from_bits(bits(rng));
          break;
        case 1:  // finite bit patterns only (every exponent, subnormals)
          x = kernels::f32_from_bits(bits(rng) & 0xbf7fffffu);
          break;
        case 2:  // float32 subnormals
          x = kernels::f32_from_bits((bits(rng) & 0x807fffffu));
          break;
        case 3:  // multiples of 1/16 times 2^e: many exact ties on every grid
          x = std::ldexp(static_cast<float>(small_int(rng)) / 16.0f, e % 64);
          break;
        case 4:  // all zero, some -0
          x = (bits(rng) & 1u) ? -0.0f : 0.0f;
          break;
        case 5:  // near the float32 maximum
          x = kernels::f32_from_bits(0x7f000000u | (bits(rng) & 0x807fffffu));
          break;
        case 6:  // one NaN or Inf among normals
          x = (i == b + static_cast<int64_t>(bits(rng) % static_cast<uint32_t>(bs)))
                  ? kernels::f32_from_bits((bits(rng) & 1u) ? 0x7fc00001u : 0xff800000u)
                  : nd(rng);
          break;
        default:  // N(0, 1) times 2^e
          x = std::ldexp(nd(rng), e);
          break;
      }
      v[static_cast<size_t>(i)] = x;
    }
  }
  // At least one NaN block and one Inf block, however few blocks there are.
  if (n > 1) v[1] = std::nanf("");
  if (n > bs + 3) v[static_cast<size_t>(bs + 3)] = -INFINITY;
  return v;
}

Tensor input_tensor(DType dt, const std::vector<float>& v, uint32_t seed) {
  const auto n = static_cast<int64_t>(v.size());
  Tensor t = Tensor::empty_host(dt, {n});
  if (dt == DType::kFloat32) {
    std::memcpy(t.data(), v.data(), v.size() * 4);
    return t;
  }
  // Half / bfloat16: the float values rounded, with one element in eight a
  // raw 16-bit pattern (NaN, Inf and subnormal halves included).
  std::mt19937 rng(seed);
  auto* p = static_cast<uint16_t*>(t.data());
  for (int64_t i = 0; i < n; ++i) {
    const float x = v[static_cast<size_t>(i)];
    uint16_t h = dt == DType::kFloat16 ? kernels::f32_to_f16(x) : kernels::f32_to_bf16(x);
    if (rng() % 8 == 0) h = static_cast<uint16_t>(rng());
    p[i] = h;
  }
  return t;
}

struct Out {
  std::vector<uint8_t> elements, scale;
};

Out quantize(const Tensor& x, MxFormat f, MxScaleRounding r, const MxLayout& l, MxIsa isa, ThreadPool* pool) {
  const int bits = kernels::mx_spec(f).bits;
  Tensor el = Tensor::empty_host(DType::kUInt8, {l.outer * l.len * bits / 8 * l.inner});
  Tensor sc = Tensor::empty_host(DType::kFloat8E8M0FNU, {l.outer * l.nblocks() * l.inner});
  std::memset(el.data(), 0xa5, el.nbytes());  // every byte must be written
  std::memset(sc.data(), 0xa5, sc.nbytes());
  OpContext ctx;
  ctx.pool = pool;
  mx_quantize_cpu(ctx, x, f, r, l, el, sc, isa);
  const auto* e = static_cast<const uint8_t*>(el.data());
  const auto* s = static_cast<const uint8_t*>(sc.data());
  return {std::vector<uint8_t>(e, e + el.nbytes()), std::vector<uint8_t>(s, s + sc.nbytes())};
}

// The first differing byte, or -1.
int64_t first_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

void compare_paths(const MxLayout& l, DType dt, uint32_t seed, ThreadPool* pool = nullptr) {
  const int64_t n = l.outer * l.len * l.inner;
  // Blocks of values follow the block axis only when it is contiguous; along
  // another axis a block mixes kinds, which also exercises the scales.
  const std::vector<float> v = make_values(n, l.inner == 1 ? l.block : 24, seed);
  const Tensor x = input_tensor(dt, v, seed + 1);
  int64_t nan_scales = 0;
  for (MxFormat f : kFormats) {
    for (MxScaleRounding r : {MxScaleRounding::kFloor, MxScaleRounding::kRceil}) {
      const Out a = quantize(x, f, r, l, MxIsa::kPortable, pool);
      const Out b = quantize(x, f, r, l, MxIsa::kAvx2, pool);
      const std::string what = std::string(mx_format_name(f)) + (r == MxScaleRounding::kFloor ? " floor" : " rceil") +
                               " " + std::string(dtype_name(dt)) + " outer " + std::to_string(l.outer) + " len " +
                               std::to_string(l.len) + " inner " + std::to_string(l.inner) + " block " +
                               std::to_string(l.block);
      EXPECT_EQ(first_diff(a.elements, b.elements), -1) << what << " (element byte)";
      EXPECT_EQ(first_diff(a.scale, b.scale), -1) << what << " (scale byte)";
      for (uint8_t c : a.scale) nan_scales += c == kernels::kE8M0Nan;
    }
  }
  EXPECT_GT(nan_scales, 0) << "the inputs should hold NaN/Inf blocks";
}

class MxAvx2 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!mx_avx2_supported()) GTEST_SKIP() << "this CPU lacks AVX2 + FMA + F16C: only the portable loop runs";
  }
};

TEST_F(MxAvx2, ContiguousFloat32MatchesPortable) {
  for (int64_t bs : {32, 64, 96}) {
    for (int64_t nblocks : {1, 7, 8, 9, 23, 200}) {
      compare_paths(MxLayout{1, bs * nblocks, 1, bs}, DType::kFloat32, static_cast<uint32_t>(bs * 1000 + nblocks));
    }
  }
}

TEST_F(MxAvx2, ContiguousHalfAndBFloat16MatchPortable) {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    compare_paths(MxLayout{3, 32 * 50, 1, 32}, dt, 7);
    compare_paths(MxLayout{1, 64 * 9, 1, 64}, dt, 8);
  }
}

TEST_F(MxAvx2, StridedAxisMatchesPortable) {
  // inner 8 / 16 / 64 / 130: whole AVX2 column groups, tails of 1-7
  // columns (portable) and more than one 64-column work item.
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (int64_t inner : {8, 13, 64, 130}) {
      compare_paths(MxLayout{2, 96, inner, 32}, dt, static_cast<uint32_t>(inner));
    }
  }
  // Block sizes the contiguous AVX2 loop does not take but the strided one does.
  compare_paths(MxLayout{1, 12, 16, 4}, DType::kFloat32, 3);
  compare_paths(MxLayout{2, 40, 24, 8}, DType::kFloat32, 4);
}

TEST_F(MxAvx2, ThreadedChunksMatchPortable) {
  ThreadPool pool(3);
  compare_paths(MxLayout{1, 32 * 5001, 1, 32}, DType::kFloat32, 11, &pool);
  compare_paths(MxLayout{5, 64, 77, 32}, DType::kFloat32, 12, &pool);
}

TEST_F(MxAvx2, TiesAndSaturationEverywhere) {
  // Every float32 whose magnitude has at most 5 significant bits across the
  // exponents of each element grid and beyond, in blocks anchored at a fixed
  // amax, so each lies on a grid point, a midpoint (tie) or past saturation.
  std::vector<float> v;
  for (int e = -12; e <= 18; ++e) {
    for (int m = 16; m < 32; ++m) {
      for (float sgn : {1.0f, -1.0f}) v.push_back(sgn * std::ldexp(static_cast<float>(m), e - 4));
    }
  }
  while (v.size() % 31 != 0) v.push_back(0.0f);
  std::vector<float> blocks;
  for (size_t i = 0; i < v.size(); i += 31) {
    blocks.push_back(448.0f);  // the anchor: every format's amax is the same
    blocks.insert(blocks.end(), v.begin() + static_cast<std::ptrdiff_t>(i),
                  v.begin() + static_cast<std::ptrdiff_t>(i + 31));
  }
  Tensor x = input_tensor(DType::kFloat32, blocks, 0);
  const MxLayout l{1, static_cast<int64_t>(blocks.size()), 1, 32};
  for (MxFormat f : kFormats) {
    for (MxScaleRounding r : {MxScaleRounding::kFloor, MxScaleRounding::kRceil}) {
      const Out a = quantize(x, f, r, l, MxIsa::kPortable, nullptr);
      const Out b = quantize(x, f, r, l, MxIsa::kAvx2, nullptr);
      EXPECT_EQ(first_diff(a.elements, b.elements), -1) << mx_format_name(f);
      EXPECT_EQ(first_diff(a.scale, b.scale), -1) << mx_format_name(f);
    }
  }
}

TEST_F(MxAvx2, ScaleEdgesOfBothRoundings) {
  // Blocks whose amax is max_elem * 2^e (every format's max, e across the
  // bottom of the e8m0 range, where amax / max_elem is subnormal and rceil
  // rounds on its mantissa, and at the top), one float32 ulp either side,
  // and powers of two and their neighbours (floor's exponent boundaries).
  std::vector<float> amaxes;
  for (float mx : {448.0f, 57344.0f, 7.5f, 28.0f, 6.0f, 1.0f}) {
    for (int e = -152; e <= 128; ++e) {
      if (e > -110 && e < 110 && e % 7 != 0) continue;
      const float a = std::ldexp(mx, e);
      if (!std::isfinite(a)) continue;
      for (float v : {a, std::nextafter(a, 0.0f), std::nextafter(a, INFINITY)}) {
        if (std::isfinite(v)) amaxes.push_back(v);
      }
    }
  }
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> blocks;
  for (float a : amaxes) {
    const size_t at = blocks.size() + rng() % 32;
    for (int i = 0; i < 32; ++i) blocks.push_back(a * u(rng));
    blocks[at] = (rng() & 1u) ? a : -a;
  }
  while (blocks.size() % 64 != 0) blocks.push_back(0.0f);
  Tensor x = input_tensor(DType::kFloat32, blocks, 0);
  for (const MxLayout& l : {MxLayout{1, static_cast<int64_t>(blocks.size()), 1, 32},
                            MxLayout{1, 32, static_cast<int64_t>(blocks.size()) / 32, 32}}) {
    for (MxFormat f : kFormats) {
      for (MxScaleRounding r : {MxScaleRounding::kFloor, MxScaleRounding::kRceil}) {
        const Out a = quantize(x, f, r, l, MxIsa::kPortable, nullptr);
        const Out b = quantize(x, f, r, l, MxIsa::kAvx2, nullptr);
        EXPECT_EQ(first_diff(a.elements, b.elements), -1) << mx_format_name(f) << " inner " << l.inner;
        EXPECT_EQ(first_diff(a.scale, b.scale), -1) << mx_format_name(f) << " inner " << l.inner;
      }
    }
  }
}

TEST(MxIsaSelect, DefaultIsaFollowsCpuid) {
  // TENSORD_CPU_ISA is unset in the test environment.
  if (std::getenv("TENSORD_CPU_ISA") != nullptr) GTEST_SKIP() << "TENSORD_CPU_ISA is set";
  EXPECT_EQ(mx_default_isa() == MxIsa::kAvx2, mx_avx2_supported());
}

}  // namespace
}  // namespace tensord
