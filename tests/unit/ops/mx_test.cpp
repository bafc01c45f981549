// MX ops (ops/cpu/mx.cpp, ops/kernels/mx.h) against a reference written here
// from OCP MX v1.0 and API.md 7, not from the implementation: each format's
// representable values are enumerated from (bias, mantissa bits, special
// codes), an element is the nearest of them to x / X compared as exact
// doubles (ties to the even code, above the largest one the largest), the
// floor scale is frexp's exponent, rceil the next power of two of the float32
// quotient, and packing a little-endian bit stream written bit by bit.
// (Long file: the reference and its drivers are shared by every case.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/thread_pool.h"
#include "ops/kernels/mx.h"
#include "ops/mx_tensor.h"
#include "op_call_util_ew.h"

namespace tensord {
namespace {

using test_ew::call;
using test_ew::call_error;
using test_ew::Kwargs;

// ---- the reference ----

struct RefFormat {
  const char* name;
  int bits, ebits, mbits, bias;
  bool e4m3_nan;  // S.1111.111 is NaN (OFP8 E4M3)
  bool e5m2_inf;  // S.11111.00 inf, S.11111.xx NaN (OFP8 E5M2)
  int emax;       // OCP emax_elem
};
const RefFormat kRef[] = {{"mxfp8_e4m3", 8, 4, 3, 7, true, false, 8},
                          {"mxfp8_e5m2", 8, 5, 2, 15, false, true, 15},
                          {"mxfp6_e2m3", 6, 2, 3, 1, false, false, 2},
                          {"mxfp6_e3m2", 6, 3, 2, 3, false, false, 4},
                          {"mxfp4_e2m1", 4, 2, 1, 1, false, false, 2}};

bool ref_special(const RefFormat& f, uint32_t mag) {
  if (f.e4m3_nan) return mag == 0x7f;
  if (f.e5m2_inf) return mag >= 0x7c;
  return false;
}

// The value of a magnitude code (not special).
double ref_value(const RefFormat& f, uint32_t mag) {
  const uint32_t e = mag >> f.mbits, m = mag & ((1u << f.mbits) - 1);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - f.bias - f.mbits);
  return std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -f.mbits), static_cast<int>(e) - f.bias);
}

// Finite magnitudes, ascending with the code (built once per format).
const std::vector<double>& ref_grid(const RefFormat& f) {
  static std::vector<double> grids[std::size(kRef)];
  std::vector<double>& g = grids[static_cast<size_t>(&f - kRef)];
  if (g.empty()) {
    for (uint32_t mag = 0; mag < (1u << (f.bits - 1)); ++mag) {
      if (!ref_special(f, mag)) g.push_back(ref_value(f, mag));
    }
  }
  return g;
}

double ref_max(const RefFormat& f) {
  return ref_grid(f).back();
}

// Magnitude code of the grid value nearest to v >= 0 (ties: even code;
// above the largest value: the largest).
uint32_t ref_round(const RefFormat& f, double v) {
  const std::vector<double>& g = ref_grid(f);
  if (v >= g.back()) return static_cast<uint32_t>(g.size() - 1);
  // g[lo] <= v < g[lo + 1]
  const size_t lo = static_cast<size_t>(std::upper_bound(g.begin(), g.end(), v) - g.begin()) - 1;
  const double dlo = v - g[lo], dhi = g[lo + 1] - v;
  if (dlo < dhi) return static_cast<uint32_t>(lo);
  if (dhi < dlo) return static_cast<uint32_t>(lo + 1);
  return static_cast<uint32_t>(lo % 2 == 0 ? lo : lo + 1);
}

int clamp_exp(int k) {
  return k < -127 ? -127 : (k > 127 ? 127 : k);
}

// e8m0 code of a block's scale; 255 for a block holding NaN or Inf.
uint32_t ref_scale(const RefFormat& f, const std::vector<float>& block, bool rceil) {
  double amax = 0;
  for (float v : block) {
    if (!std::isfinite(v)) return 255;
    amax = std::max(amax, std::fabs(static_cast<double>(v)));
  }
  if (!rceil) {
    if (amax == 0) return 0;  // log2(0) = -inf, clamped
    int e = 0;
    std::frexp(amax, &e);  // amax = f * 2^e, f in [0.5, 1): floor(log2 amax) = e - 1
    return static_cast<uint32_t>(clamp_exp(e - 1 - f.emax) + 127);
  }
  // API.md 7: amax / max_elem in float32, rounded up to a power of two.
  const float d = static_cast<float>(amax) / static_cast<float>(ref_max(f));
  if (d == 0) return 0;
  int e = 0;
  const double fr = std::frexp(static_cast<double>(d), &e);
  const int k = fr == 0.5 ? e - 1 : e;  // d == 2^(e-1) exactly, else 2^e is the next power
  return static_cast<uint32_t>(clamp_exp(k) + 127);
}

// Codes (sign on top) of a block under scale code `sc`; all zero when NaN.
std::vector<uint32_t> ref_codes(const RefFormat& f, const std::vector<float>& block, uint32_t sc) {
  std::vector<uint32_t> c(block.size(), 0);
  if (sc == 255) return c;
  for (size_t i = 0; i < block.size(); ++i) {
    const double v = std::ldexp(std::fabs(static_cast<double>(block[i])), -(static_cast<int>(sc) - 127));
    c[i] = ref_round(f, v) | (std::signbit(block[i]) ? 1u << (f.bits - 1) : 0u);
  }
  return c;
}

// Packs codes as a little-endian bit stream, one bit at a time.
std::vector<uint8_t> ref_pack(const RefFormat& f, const std::vector<uint32_t>& codes) {
  std::vector<uint8_t> out(codes.size() * static_cast<size_t>(f.bits) / 8, 0);
  for (size_t i = 0; i < codes.size(); ++i) {
    for (int b = 0; b < f.bits; ++b) {
      const size_t n = i * static_cast<size_t>(f.bits) + static_cast<size_t>(b);
      if ((codes[i] >> b) & 1u) out[n / 8] |= static_cast<uint8_t>(1u << (n % 8));
    }
  }
  return out;
}

std::vector<uint32_t> ref_unpack(const RefFormat& f, const std::vector<uint8_t>& bytes) {
  std::vector<uint32_t> codes(bytes.size() * 8 / static_cast<size_t>(f.bits), 0);
  for (size_t i = 0; i < codes.size(); ++i) {
    for (int b = 0; b < f.bits; ++b) {
      const size_t n = i * static_cast<size_t>(f.bits) + static_cast<size_t>(b);
      if ((bytes[n / 8] >> (n % 8)) & 1u) codes[i] |= 1u << b;
    }
  }
  return codes;
}

// The float32 a code dequantizes to under scale code `sc`.
float ref_dequant(const RefFormat& f, uint32_t code, uint32_t sc) {
  const uint32_t mag = code & ((1u << (f.bits - 1)) - 1);
  const bool neg = (code >> (f.bits - 1)) & 1u;
  if (sc == 255) return std::numeric_limits<float>::quiet_NaN();
  double v;
  if (f.e4m3_nan && mag == 0x7f) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (f.e5m2_inf && mag >= 0x7c) {
    v = mag == 0x7c ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = std::ldexp(ref_value(f, mag), static_cast<int>(sc) - 127);
  }
  return static_cast<float>(neg ? -v : v);
}

// ---- drivers ----

int mx_bits(const char* fmt) {
  for (const RefFormat& f : kRef) {
    if (std::string(fmt) == f.name) return f.bits;
  }
  return 0;
}

Tensor f32_tensor(Shape shape, const std::vector<float>& v) {
  Tensor t = Tensor::empty_host(DType::kFloat32, std::move(shape));
  EXPECT_EQ(t.numel(), static_cast<int64_t>(v.size()));
  std::memcpy(t.data(), v.data(), v.size() * sizeof(float));
  return t;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data());
  return std::vector<uint8_t>(p, p + t.nbytes());
}

std::vector<float> floats_of(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.data(), t.nbytes());
  return v;
}

bool same_float(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0;
}

// An MX tensor (one value, ops/mx_tensor.h) with views of its two parts.
struct Quantized {
  Tensor q, elements, scale;
};

Quantized quantize(const Tensor& x, const char* fmt, int64_t bs = 32, int64_t axis = -1, const char* r = "floor",
                   ThreadPool* pool = nullptr) {
  auto out = call("mx.quantize", {x, fmt, bs, axis, r}, {}, pool);
  EXPECT_EQ(out.size(), 1u);
  const Tensor& q = out.at(0);
  EXPECT_TRUE(q.is_mx());
  EXPECT_EQ(mx_format_name(q.meta().mx->format), fmt);
  EXPECT_EQ(q.meta().mx->block_size, bs);
  EXPECT_EQ(q.meta().mx->axis, axis);
  EXPECT_EQ(q.shape(), x.shape());
  // One allocation: the packed elements, then the scales.
  EXPECT_EQ(q.nbytes(), static_cast<size_t>(x.numel() * mx_bits(fmt) / 8 + x.numel() / bs));
  EXPECT_EQ(mx_scale(q).data(), static_cast<const char*>(q.data()) + mx_elements(q).nbytes());
  return {q, mx_elements(q), mx_scale(q)};
}

// An MX tensor of logical `shape` from hand-made parts.
Quantized from_parts(const Tensor& el, const Tensor& sc, const char* fmt, Shape shape, int64_t bs = 32,
                     int64_t axis = -1) {
  auto m = make_mx_meta(*mx_format_from_name(fmt), bs, axis, std::move(shape), false, "test");
  Tensor q = mx_from_parts(m, el, sc, ErrorCode::kBadRequest, "test");
  return {q, mx_elements(q), mx_scale(q)};
}

Tensor dequantize(const Quantized& q, const char* fmt, int64_t axis = -1, ThreadPool* pool = nullptr) {
  EXPECT_EQ(mx_format_name(q.q.meta().mx->format), fmt);
  EXPECT_EQ(q.q.meta().mx->axis, axis);
  Tensor d = call("mx.dequantize", {q.q}, {}, pool).at(0);
  EXPECT_EQ(d.dtype(), DType::kFloat32);
  EXPECT_EQ(d.shape(), q.q.shape());
  return d;
}

// Quantizes `values` (logical `shape`, float32) and checks every scale code
// and packed byte against the reference, fiber by fiber along `axis`.
// `as_input`: the values the op sees (narrow inputs are converted first).
void check_quantize(const RefFormat& f, const Shape& shape, const std::vector<float>& values, int64_t bs, int64_t axis,
                    bool rceil, DType dtype = DType::kFloat32, ThreadPool* pool = nullptr) {
  Tensor x = test_ew::make(dtype, shape, std::vector<double>(values.begin(), values.end()));
  const std::vector<double> seen = test_ew::values(x);
  Quantized q = quantize(x, f.name, bs, axis, rceil ? "rceil" : "floor", pool);
  const int64_t ax = axis < 0 ? axis + static_cast<int64_t>(shape.size()) : axis;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < ax; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(ax) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t len = shape[static_cast<size_t>(ax)], nb = len / bs, lenp = len * f.bits / 8;
  const std::vector<uint8_t> qb = bytes_of(q.elements), sb = bytes_of(q.scale);
  ASSERT_EQ(static_cast<int64_t>(qb.size()), outer * lenp * inner);
  ASSERT_EQ(static_cast<int64_t>(sb.size()), outer * nb * inner);
  int failures = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<uint32_t> codes;
      for (int64_t j = 0; j < nb; ++j) {
        std::vector<float> block;
        for (int64_t e = 0; e < bs; ++e) {
          block.push_back(static_cast<float>(seen[static_cast<size_t>((o * len + j * bs + e) * inner + i)]));
        }
        const uint32_t sc = ref_scale(f, block, rceil);
        const uint32_t got = sb[static_cast<size_t>((o * nb + j) * inner + i)];
        if (got != sc && ++failures < 5) {
          ADD_FAILURE() << f.name << (rceil ? " rceil" : " floor") << " block (" << o << ", " << j << ", " << i
                        << ") scale " << got << ", reference " << sc << " (amax of " << block[0] << "...)";
        }
        for (uint32_t c : ref_codes(f, block, sc)) codes.push_back(c);
      }
      const std::vector<uint8_t> want = ref_pack(f, codes);
      for (int64_t k = 0; k < lenp; ++k) {
        const uint8_t got = qb[static_cast<size_t>((o * lenp + k) * inner + i)];
        if (got != want[static_cast<size_t>(k)] && ++failures < 5) {
          const int64_t e0 = k * 8 / f.bits;
          ADD_FAILURE() << f.name << (rceil ? " rceil" : " floor") << " fiber (" << o << ", " << i << ") byte " << k
                        << ": 0x" << std::hex << int{got} << ", reference 0x" << int{want[static_cast<size_t>(k)]}
                        << std::dec << " (element " << e0 << " = "
                        << seen[static_cast<size_t>((o * len + e0) * inner + i)] << ")";
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

// Values of the grid, the midpoints between neighbours and one float32 ulp
// either side of each, tiny values, and values past the largest one up to
// (not reaching) 2^(emax+1), with both signs.
std::vector<float> boundary_points(const RefFormat& f) {
  const std::vector<double> g = ref_grid(f);
  std::vector<float> p;
  auto add = [&](double v) {
    const auto x = static_cast<float>(v);
    for (float y : {x, std::nextafter(x, 0.0f), std::nextafter(x, 1e30f)}) {
      if (y >= 0 && y < std::ldexp(1.0f, f.emax + 1)) {
        p.push_back(y);
        p.push_back(-y);
      }
    }
  };
  for (size_t i = 0; i < g.size(); ++i) {
    add(g[i]);
    if (i + 1 < g.size()) add((g[i] + g[i + 1]) / 2);
  }
  const double top = std::ldexp(1.0, f.emax + 1);
  for (double t : {0.25, 0.5, 0.75, 1.0}) add(g.back() + (top - g.back()) * t);
  add(g[1] / 4);
  add(g[1] / 2);
  add(g[1] * 3 / 4);
  return p;
}

// Blocks of 32 whose first element is `anchor` and the rest are `points`.
std::vector<float> blocks_with_anchor(float anchor, const std::vector<float>& points) {
  std::vector<float> v;
  for (size_t i = 0; i < points.size(); i += 31) {
    v.push_back(anchor);
    for (size_t k = 0; k < 31; ++k) v.push_back(i + k < points.size() ? points[i + k] : 0.0f);
  }
  return v;
}

// ---- the element grid ----

TEST(MxQuantize, EveryRoundingBoundaryAndTieEveryFormat) {
  for (const RefFormat& f : kRef) {
    const std::vector<float> pts = boundary_points(f);
    // Anchored at the largest value: scale 1 under both roundings (floor:
    // floor(log2 max) = emax; rceil: max / max = 1), so every point lands
    // on the element grid as is; the points past max saturate under floor.
    for (bool rceil : {false, true}) {
      const std::vector<float> v = blocks_with_anchor(static_cast<float>(ref_max(f)), pts);
      check_quantize(f, {static_cast<int64_t>(v.size())}, v, 32, -1, rceil);
      // The same points at other scales, small and large.
      for (int k : {-120, -60, -9, 1, 37, 100}) {
        std::vector<float> w = v;
        for (float& x : w) x = std::ldexp(x, k);
        check_quantize(f, {static_cast<int64_t>(w.size())}, w, 32, -1, rceil);
      }
    }
  }
}

TEST(MxQuantize, HandPickedElements) {
  // mxfp4_e2m1 grid: 0 0.5 1 1.5 2 3 4 6; a block anchored at 6 has scale 1.
  std::vector<float> v(32, 0.0f);
  const float in[] = {6, 0.25f, 0.75f, 1.25f, 2.5f, 3.5f, 5, 7, 7.99f, -0.2f, -2.5f, -5.5f};
  const uint8_t want[] = {0x7, 0x0, 0x2, 0x2, 0x4, 0x6, 0x6, 0x7, 0x7, 0x8, 0xc, 0xf};
  std::copy(std::begin(in), std::end(in), v.begin());
  Quantized q = quantize(f32_tensor({32}, v), "mxfp4_e2m1");
  const std::vector<uint8_t> b = bytes_of(q.elements);
  EXPECT_EQ(bytes_of(q.scale)[0], 127);
  for (size_t i = 0; i < std::size(want); ++i) {
    EXPECT_EQ((b[i / 2] >> (4 * (i % 2))) & 0xf, want[i]) << "element " << i << " = " << in[i];
  }
  // mxfp8_e4m3: 464 is halfway between 448 and the NaN slot (480): ties to
  // even, i.e. 448; 17 is halfway between 16 and 18: 16.
  std::vector<float> w(32, 0.0f);
  w[0] = 464;
  w[1] = 17;
  w[2] = 0.0009765625f;   // 2^-10: half the smallest subnormal 2^-9: ties to 0
  w[3] = 0.00146484375f;  // 1.5 * 2^-10 : above the half, rounds to 2^-9
  Quantized q8 = quantize(f32_tensor({32}, w), "mxfp8_e4m3");
  EXPECT_EQ(bytes_of(q8.scale)[0], 127);
  EXPECT_EQ(bytes_of(q8.elements)[0], 0x7e);
  EXPECT_EQ(bytes_of(q8.elements)[1], 0x58);  // 16 = 2^4: biased exponent 11, mantissa 0
  EXPECT_EQ(bytes_of(q8.elements)[2], 0x00);
  EXPECT_EQ(bytes_of(q8.elements)[3], 0x01);
}

// Exhaustive over every 4099th float32 bit pattern: the kernel's element
// encoder at scale 1 against the reference (both signs, every binade).
TEST(MxKernels, EncodeAgainstReferenceAcrossFloat32) {
  for (int fi = 0; fi < kernels::kNumMxFormats; ++fi) {
    const RefFormat& f = kRef[fi];
    const kernels::MxElemSpec s = kernels::mx_spec(static_cast<kernels::MxFormat>(fi));
    int failures = 0;
    for (uint64_t u = 0; u < 0x7f800000u; u += 4099) {
      float x;
      const auto bits = static_cast<uint32_t>(u);
      std::memcpy(&x, &bits, 4);
      for (float y : {x, -x}) {
        const uint32_t got = kernels::mx_encode(y, 1.0f, s);
        const uint32_t want = ref_codes(f, {y}, 127)[0];
        if (got != want && ++failures < 5) ADD_FAILURE() << f.name << " " << y << ": " << got << " vs " << want;
      }
    }
    EXPECT_EQ(failures, 0) << f.name;
  }
}

TEST(MxQuantize, SubnormalElements) {
  for (const RefFormat& f : kRef) {
    const std::vector<double> g = ref_grid(f);
    const double min_normal = std::ldexp(1.0, 1 - f.bias);
    std::vector<float> pts;
    for (double v = g[1] / 8; v < min_normal * 1.5; v += g[1] / 8) {
      pts.push_back(static_cast<float>(v));
      pts.push_back(static_cast<float>(-v));
    }
    for (bool rceil : {false, true}) {
      const std::vector<float> v = blocks_with_anchor(static_cast<float>(ref_max(f)), pts);
      check_quantize(f, {static_cast<int64_t>(v.size())}, v, 32, -1, rceil);
    }
  }
}

// ---- scales ----

std::vector<float> scale_probe_amaxes(const RefFormat& f) {
  std::vector<float> a;
  const auto maxf = static_cast<float>(ref_max(f));
  for (int j = -149; j <= 127; ++j) {
    const float p = std::ldexp(1.0f, j);
    for (float v : {p, std::nextafter(p, 0.0f), std::nextafter(p, 1e38f), p * 1.125f, p * 1.5f}) {
      if (std::isfinite(v)) a.push_back(v);
    }
    const float m = std::ldexp(maxf, j);  // rceil's boundary: amax / max_elem a power of two
    if (std::isfinite(m) && m > 0) {
      for (float v : {m, std::nextafter(m, 0.0f), std::nextafter(m, 1e38f)}) a.push_back(v);
    }
  }
  for (float v : {std::numeric_limits<float>::max(), std::nextafter(std::numeric_limits<float>::max(), 0.0f),
                  std::numeric_limits<float>::min(), std::nextafter(std::numeric_limits<float>::min(), 0.0f),
                  std::numeric_limits<float>::denorm_min(), 0.0f}) {
    a.push_back(v);
  }
  return a;
}

TEST(MxQuantize, ScaleEveryBinadeBothRoundingsEveryFormat) {
  for (const RefFormat& f : kRef) {
    // One block per amax: the amax first, then a spread of smaller values.
    std::vector<float> v;
    for (float amax : scale_probe_amaxes(f)) {
      v.push_back(amax);
      for (int i = 1; i < 32; ++i) v.push_back((i % 2 ? -amax : amax) * static_cast<float>(i) / 37.0f);
    }
    for (bool rceil : {false, true}) check_quantize(f, {static_cast<int64_t>(v.size()) / 32, 32}, v, 32, -1, rceil);
  }
}

TEST(MxQuantize, ScaleHandPicked) {
  auto scale_of = [](float amax, const char* fmt, const char* r) {
    std::vector<float> v(32, 0.0f);
    v[5] = -amax;
    return bytes_of(quantize(f32_tensor({32}, v), fmt, 32, -1, r).scale)[0];
  };
  // floor: 2^(floor(log2 amax) - emax).
  EXPECT_EQ(scale_of(6.0f, "mxfp4_e2m1", "floor"), 127);
  EXPECT_EQ(scale_of(7.99f, "mxfp4_e2m1", "floor"), 127);  // not rounded up: 7.99 saturates to 6
  EXPECT_EQ(scale_of(8.0f, "mxfp4_e2m1", "floor"), 128);
  EXPECT_EQ(scale_of(448.0f, "mxfp8_e4m3", "floor"), 127);
  EXPECT_EQ(scale_of(1.0f, "mxfp8_e5m2", "floor"), 127 - 15);
  // Near the float32 maximum: 2^(127 - emax), far from e8m0's top (254).
  EXPECT_EQ(scale_of(std::numeric_limits<float>::max(), "mxfp8_e4m3", "floor"), 127 + 127 - 8);
  EXPECT_EQ(scale_of(std::numeric_limits<float>::max(), "mxfp4_e2m1", "floor"), 127 + 127 - 2);
  // Below the smallest normal, and zero: clamped to 2^-127 (code 0).
  EXPECT_EQ(scale_of(std::ldexp(1.0f, -130), "mxfp4_e2m1", "floor"), 0);
  EXPECT_EQ(scale_of(std::numeric_limits<float>::denorm_min(), "mxfp8_e4m3", "floor"), 0);
  EXPECT_EQ(scale_of(std::ldexp(1.0f, -119), "mxfp8_e4m3", "floor"), 0);  // -119 - 8 = -127
  EXPECT_EQ(scale_of(std::ldexp(1.0f, -118), "mxfp8_e4m3", "floor"), 1);
  EXPECT_EQ(scale_of(0.0f, "mxfp6_e3m2", "floor"), 0);
  // rceil: amax / max_elem rounded up to a power of two.
  EXPECT_EQ(scale_of(6.0f, "mxfp4_e2m1", "rceil"), 127);
  EXPECT_EQ(scale_of(6.75f, "mxfp4_e2m1", "rceil"), 128);  // 6.75 / 6 = 1.125: up, not down to 1
  EXPECT_EQ(scale_of(7.99f, "mxfp4_e2m1", "rceil"), 128);
  EXPECT_EQ(scale_of(3.0f, "mxfp4_e2m1", "rceil"), 126);
  EXPECT_EQ(scale_of(3.01f, "mxfp4_e2m1", "rceil"), 127);
  EXPECT_EQ(scale_of(std::numeric_limits<float>::max(), "mxfp4_e2m1", "rceil"), 127 + 126);
  EXPECT_EQ(scale_of(std::ldexp(1.0f, -140), "mxfp8_e4m3", "rceil"), 0);
  EXPECT_EQ(scale_of(0.0f, "mxfp8_e4m3", "rceil"), 0);
}

TEST(MxKernels, ScaleClampsAtBothEnds) {
  for (int fi = 0; fi < kernels::kNumMxFormats; ++fi) {
    const kernels::MxElemSpec s = kernels::mx_spec(static_cast<kernels::MxFormat>(fi));
    // Bottom: zero, the smallest subnormal and the smallest normal clamp to 2^-127.
    for (uint32_t bits : {0u, 1u, 0x00800000u}) {
      EXPECT_EQ(kernels::mx_scale_floor(bits, s), 0) << fi;
      EXPECT_EQ(kernels::mx_scale_rceil(bits, s), 0) << fi;
    }
    // Top: the largest finite float32 stays below e8m0's largest code 254
    // (2^127) for every format, so float32 input never reaches the clamp.
    EXPECT_EQ(kernels::mx_scale_floor(0x7f7fffffu, s), 254 - s.emax) << fi;
    EXPECT_LE(kernels::mx_scale_rceil(0x7f7fffffu, s), 254) << fi;
    // inf and NaN amax bit patterns.
    EXPECT_EQ(kernels::mx_scale_floor(0x7f800000u, s), 255);
    EXPECT_EQ(kernels::mx_scale_rceil(0x7fc00000u, s), 255);
  }
}

TEST(MxQuantize, ZeroNanAndInfBlocksAreTheirOwn) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const RefFormat& f : kRef) {
    for (const char* r : {"floor", "rceil"}) {
      std::vector<float> v(32 * 6);
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) - 3.0f;
      for (size_t i = 32; i < 64; ++i) v[i] = (i % 2) ? -0.0f : 0.0f;  // block 1: zeros (signed)
      v[64 + 17] = nan;                                                // block 2
      v[96 + 31] = inf;                                                // block 3
      v[128] = -inf;                                                   // block 4
      Quantized q = quantize(f32_tensor({6, 32}, v), f.name, 32, -1, r);
      const std::vector<uint8_t> s = bytes_of(q.scale), e = bytes_of(q.elements);
      EXPECT_EQ(s[1], 0) << f.name;
      EXPECT_EQ(s[2], 255) << f.name;
      EXPECT_EQ(s[3], 255) << f.name;
      EXPECT_EQ(s[4], 255) << f.name;
      EXPECT_NE(s[0], 255);
      EXPECT_EQ(s[0], s[5]);
      const size_t bb = 32 * static_cast<size_t>(f.bits) / 8;
      for (size_t k = 2 * bb; k < 5 * bb; ++k) EXPECT_EQ(e[k], 0) << f.name << " byte " << k;
      const std::vector<float> d = floats_of(dequantize(q, f.name));
      for (size_t i = 0; i < 32; ++i) {
        EXPECT_EQ(d[32 + i], 0.0f);
        EXPECT_EQ(std::signbit(d[32 + i]), std::signbit(v[32 + i])) << "signed zero " << i;
      }
      for (size_t i = 64; i < 160; ++i) EXPECT_TRUE(std::isnan(d[i])) << f.name << " " << i;
      EXPECT_EQ(d[0], v[0]);
      EXPECT_EQ(d[160], v[160]);
      check_quantize(f, {6, 32}, v, 32, -1, std::string(r) == "rceil");
    }
  }
}

// ---- random data, layouts, dtypes ----

// Blocks of normal values with per-block magnitudes from 2^-140 to 2^120,
// some exactly zero, some with one large outlier.
std::vector<float> random_values(size_t n, std::mt19937& rng, int lo = -140, int hi = 120) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> mag(lo, hi), kind(0, 9);
  std::vector<float> v(n);
  int k = 0, m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i % 16 == 0) {
      k = kind(rng);
      m = mag(rng);
    }
    v[i] = k == 0 ? 0.0f : std::ldexp(nd(rng), m);
    if (k == 1 && i % 16 == 3) v[i] = std::ldexp(300.0f, m);
  }
  return v;
}

TEST(MxQuantize, RandomEveryFormatRoundingAndDtype) {
  std::mt19937 rng(17);
  for (const RefFormat& f : kRef) {
    for (bool rceil : {false, true}) {
      for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
        // float16 holds 2^-24 .. 65504: magnitudes that stay (mostly) inside.
        std::vector<float> v =
            dt == DType::kFloat16 ? random_values(32 * 64, rng, -26, 6) : random_values(32 * 64, rng);
        check_quantize(f, {8, 256}, v, 32, -1, rceil, dt);
      }
    }
  }
}

TEST(MxQuantize, AnyAxisAndBlockSize) {
  std::mt19937 rng(3);
  struct Case {
    Shape shape;
    int64_t axis, bs;
  };
  const Case cases[] = {{{2, 64, 3}, 1, 32}, {{2, 64, 3}, -2, 16}, {{64, 5}, 0, 32},    {{2, 3, 32, 2}, 2, 8},
                        {{96, 70}, 0, 32},   {{3, 96}, -1, 96},    {{4, 12, 65}, 1, 4}, {{128}, 0, 128}};
  for (const RefFormat& f : kRef) {
    for (const Case& c : cases) {
      if (c.bs % (f.bits == 6 ? 4 : 2) != 0) continue;
      std::vector<float> v = random_values(static_cast<size_t>(shape_numel(c.shape)), rng);
      for (bool rceil : {false, true}) check_quantize(f, c.shape, v, c.bs, c.axis, rceil);
      // Dequantize along the same axis matches the reference per element.
      Quantized q = quantize(f32_tensor(c.shape, v), f.name, c.bs, c.axis);
      Tensor d = dequantize(q, f.name, c.axis);
      EXPECT_EQ(d.shape(), c.shape);
      Quantized q2 = quantize(d, f.name, c.bs, c.axis);
      EXPECT_EQ(bytes_of(q2.elements), bytes_of(q.elements)) << f.name << " axis " << c.axis;
      EXPECT_EQ(bytes_of(q2.scale), bytes_of(q.scale)) << f.name << " axis " << c.axis;
    }
  }
}

TEST(MxQuantize, ThreadPoolGivesTheSameBits) {
  ThreadPool pool(4);
  std::mt19937 rng(5);
  for (const RefFormat& f : kRef) {
    for (const Shape& shape : {Shape{64, 4096}, Shape{256, 300}}) {
      const int64_t axis = shape[1] == 300 ? 0 : 1;
      std::vector<float> v = random_values(static_cast<size_t>(shape_numel(shape)), rng);
      Tensor x = f32_tensor(shape, v);
      Quantized a = quantize(x, f.name, 32, axis), b = quantize(x, f.name, 32, axis, "floor", &pool);
      EXPECT_EQ(bytes_of(a.elements), bytes_of(b.elements));
      EXPECT_EQ(bytes_of(a.scale), bytes_of(b.scale));
      std::vector<float> da = floats_of(dequantize(a, f.name, axis)),
                         db = floats_of(dequantize(b, f.name, axis, &pool));
      ASSERT_EQ(da.size(), db.size());
      for (size_t i = 0; i < da.size(); ++i) ASSERT_TRUE(same_float(da[i], db[i])) << i;
    }
  }
}

// ---- dequantize and packing ----

TEST(MxDequantize, EveryCodeUnderScalesAtBothEnds) {
  for (const RefFormat& f : kRef) {
    const uint32_t ncodes = 1u << f.bits;
    const auto len = static_cast<int64_t>(std::max<uint32_t>(ncodes, 32));
    std::vector<uint32_t> codes(static_cast<size_t>(len));
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint32_t>(i) % ncodes;
    const std::vector<uint8_t> packed = ref_pack(f, codes);
    const uint8_t scales[] = {0, 1, 100, 127, 128, 200, 253, 254, 255};
    const auto rows = static_cast<int64_t>(std::size(scales));
    Tensor el = Tensor::empty_host(DType::kUInt8, {rows, static_cast<int64_t>(packed.size())});
    Tensor sc = Tensor::empty_host(DType::kFloat8E8M0FNU, {rows, len / 32});
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(el.data_ptr<uint8_t>() + r * static_cast<int64_t>(packed.size()), packed.data(), packed.size());
      std::memset(static_cast<uint8_t*>(sc.data()) + r * (len / 32), scales[r], static_cast<size_t>(len / 32));
    }
    const std::vector<float> d = floats_of(dequantize(from_parts(el, sc, f.name, {rows, len}), f.name));
    ASSERT_EQ(static_cast<int64_t>(d.size()), rows * len);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < len; ++i) {
        const float want = ref_dequant(f, codes[static_cast<size_t>(i)], scales[r]);
        const float got = d[static_cast<size_t>(r * len + i)];
        ASSERT_TRUE(same_float(got, want)) << f.name << " code " << codes[static_cast<size_t>(i)] << " scale "
                                           << int{scales[r]} << ": " << got << " vs " << want;
      }
    }
  }
}

TEST(MxPacking, RandomBytesUnpackAndRepack) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  for (const RefFormat& f : kRef) {
    std::vector<uint8_t> packed(static_cast<size_t>(64 * f.bits / 8 * 4));
    for (auto& b : packed) b = static_cast<uint8_t>(byte(rng));
    EXPECT_EQ(ref_pack(f, ref_unpack(f, packed)), packed);
    Tensor el = Tensor::empty_host(DType::kUInt8, {4, static_cast<int64_t>(packed.size() / 4)});
    std::memcpy(el.data(), packed.data(), packed.size());
    Tensor sc = Tensor::empty_host(DType::kFloat8E8M0FNU, {4, 2});
    std::memset(sc.data(), 127, 8);
    const std::vector<float> d = floats_of(dequantize(from_parts(el, sc, f.name, {4, 64}), f.name));
    const std::vector<uint32_t> codes = ref_unpack(f, packed);
    for (size_t i = 0; i < codes.size(); ++i) {
      ASSERT_TRUE(same_float(d[i], ref_dequant(f, codes[i], 127))) << f.name << " element " << i;
    }
    // Requantizing the finite values with their block scale pinned at 1
    // (an anchor of max in front) gives back the same codes, hence bytes.
    std::vector<uint32_t> finite;
    for (uint32_t c : codes) {
      const float x = ref_dequant(f, c, 127);
      finite.push_back(std::isfinite(x) ? c : 0u);
    }
    std::vector<float> vals;
    std::vector<uint32_t> want;
    for (size_t i = 0; i < finite.size(); i += 31) {
      vals.push_back(static_cast<float>(ref_max(f)));
      want.push_back(ref_round(f, ref_max(f)));
      for (size_t k = 0; k < 31; ++k) {
        const uint32_t c = i + k < finite.size() ? finite[i + k] : 0u;
        vals.push_back(ref_dequant(f, c, 127));
        want.push_back(c);
      }
    }
    Quantized q = quantize(f32_tensor({static_cast<int64_t>(vals.size())}, vals), f.name);
    EXPECT_EQ(bytes_of(q.elements), ref_pack(f, want)) << f.name;
  }
}

TEST(MxQuantize, QuantizeDequantizeQuantizeIsAFixedPoint) {
  std::mt19937 rng(23);
  for (const RefFormat& f : kRef) {
    std::vector<float> v = random_values(32 * 512, rng);
    Tensor x = f32_tensor({512, 32}, v);
    // floor: bit for bit after one round.
    Quantized q = quantize(x, f.name);
    Quantized q2 = quantize(dequantize(q, f.name), f.name);
    EXPECT_EQ(bytes_of(q2.elements), bytes_of(q.elements)) << f.name;
    EXPECT_EQ(bytes_of(q2.scale), bytes_of(q.scale)) << f.name;
    // rceil: the values are a fixed point at once; a block whose largest
    // element rounded down to max/2 takes a scale half as large the second
    // time (same values), and from then on the bits are fixed too.
    Quantized r = quantize(x, f.name, 32, -1, "rceil");
    const std::vector<float> d1 = floats_of(dequantize(r, f.name));
    Quantized r2 = quantize(dequantize(r, f.name), f.name, 32, -1, "rceil");
    const std::vector<float> d2 = floats_of(dequantize(r2, f.name));
    for (size_t i = 0; i < d1.size(); ++i) ASSERT_TRUE(same_float(d1[i], d2[i])) << f.name << " " << i;
    Quantized r3 = quantize(dequantize(r2, f.name), f.name, 32, -1, "rceil");
    EXPECT_EQ(bytes_of(r3.elements), bytes_of(r2.elements)) << f.name;
    EXPECT_EQ(bytes_of(r3.scale), bytes_of(r2.scale)) << f.name;
  }
  // The rceil case spelled out: mxfp4_e2m1, amax 3.1 -> scale 1, 3.1 -> 3;
  // again: 3 / 6 = 0.5 -> scale 1/2 and element 6 (still 3).
  std::vector<float> v(32, 0.0f);
  v[0] = 3.1f;
  Quantized r = quantize(f32_tensor({32}, v), "mxfp4_e2m1", 32, -1, "rceil");
  EXPECT_EQ(bytes_of(r.scale)[0], 127);
  Quantized r2 = quantize(dequantize(r, "mxfp4_e2m1"), "mxfp4_e2m1", 32, -1, "rceil");
  EXPECT_EQ(bytes_of(r2.scale)[0], 126);
  EXPECT_EQ(floats_of(dequantize(r2, "mxfp4_e2m1"))[0], 3.0f);
}

TEST(MxQuantize, EmptyTensors) {
  for (const RefFormat& f : kRef) {
    Quantized q = quantize(Tensor::empty_host(DType::kFloat32, {0, 32}), f.name);
    EXPECT_EQ(q.elements.shape(), (Shape{0, 32 * f.bits / 8}));
    EXPECT_EQ(q.scale.shape(), (Shape{0, 1}));
    Quantized q0 = quantize(Tensor::empty_host(DType::kFloat32, {3, 0}), f.name);
    EXPECT_EQ(q0.scale.shape(), (Shape{3, 0}));
    EXPECT_EQ(dequantize(q0, f.name).shape(), (Shape{3, 0}));
  }
}

// ---- errors (all 4xx: invalid_argument, shape_mismatch, dtype_mismatch are 422) ----

TEST(MxErrors, NamesTheChoicesAndTheShape) {
  Tensor x = f32_tensor({2, 32}, std::vector<float>(64, 1.0f));
  std::string msg;
  EXPECT_EQ(call_error("mx.quantize", {x, "mxfp4"}, {}, &msg), ErrorCode::kInvalidArgument);
  for (const RefFormat& f : kRef) EXPECT_NE(msg.find(f.name), std::string::npos) << msg;
  EXPECT_EQ(call_error("mx.quantize", {x, "mxfp8_e4m3"}, {{"scale_rounding", "ceil"}}, &msg),
            ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("floor, rceil"), std::string::npos) << msg;
  EXPECT_EQ(call_error("mx.quantize", {x, "mxfp8_e4m3"}, {{"axis", 0}}, &msg), ErrorCode::kShapeMismatch);
  EXPECT_NE(msg.find("multiple of block_size 32"), std::string::npos) << msg;
  EXPECT_EQ(call_error("mx.quantize", {f32_tensor({30}, std::vector<float>(30, 1.0f)), "mxfp8_e4m3"}, {}),
            ErrorCode::kShapeMismatch);
  EXPECT_EQ(call_error("mx.quantize", {x, "mxfp8_e4m3"}, {{"axis", 2}}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(call_error("mx.quantize", {f32_tensor({}, {1.0f}), "mxfp8_e4m3"}, {}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(call_error("mx.quantize", {x, "mxfp8_e4m3"}, {{"block_size", 0}}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(call_error("mx.quantize", {x, "mxfp4_e2m1"}, {{"block_size", 1}}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(call_error("mx.quantize", {x, "mxfp6_e2m3"}, {{"block_size", 2}}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(
      call_error("mx.quantize", {test_ew::make(DType::kInt32, {32}, std::vector<double>(32, 1)), "mxfp8_e4m3"}, {}),
      ErrorCode::kDtypeMismatch);
  EXPECT_EQ(
      call_error("mx.quantize", {test_ew::make(DType::kFloat64, {32}, std::vector<double>(32, 1)), "mxfp8_e4m3"}, {}),
      ErrorCode::kDtypeMismatch);

  // mx.dequantize takes one MX tensor; anything else is dtype_mismatch.
  Quantized q = quantize(x, "mxfp6_e3m2");
  EXPECT_EQ(call_error("mx.dequantize", {q.elements}, {}, &msg), ErrorCode::kDtypeMismatch);
  EXPECT_NE(msg.find("expected an MX tensor"), std::string::npos) << msg;
  EXPECT_EQ(call_error("mx.dequantize", {x}, {}), ErrorCode::kDtypeMismatch);
  EXPECT_EQ(call_error("mx.quantize", {q.q, "mxfp8_e4m3"}, {}, &msg), ErrorCode::kDtypeMismatch);
  EXPECT_NE(msg.find("MX tensor already"), std::string::npos) << msg;
}

TEST(MxTensor, PartsMustMatchTheDescription) {
  Tensor x = f32_tensor({2, 64}, std::vector<float>(128, 1.5f));
  Quantized q = quantize(x, "mxfp4_e2m1");
  EXPECT_EQ(q.elements.shape(), (Shape{2, 32}));
  EXPECT_EQ(q.scale.shape(), (Shape{2, 2}));
  EXPECT_EQ(q.q.meta().str(), "mxfp4_e2m1[2, 64] (block_size 32, axis -1)");
  auto m = q.q.meta().mx;
  // Copied into one allocation: the same bytes, an MX tensor again.
  Tensor again = mx_from_parts(m, q.elements, q.scale, ErrorCode::kBadRequest, "t");
  EXPECT_EQ(bytes_of(again), bytes_of(q.q));
  EXPECT_EQ(floats_of(dequantize({again, q.elements, q.scale}, "mxfp4_e2m1")), floats_of(dequantize(q, "mxfp4_e2m1")));
  // A scale count, a packed size or a dtype that does not match.
  Tensor short_scale = Tensor::empty_host(DType::kFloat8E8M0FNU, {2, 1});
  Tensor long_elements = Tensor::empty_host(DType::kUInt8, {2, 33});
  Tensor wrong_dtype = Tensor::empty_host(DType::kInt8, {2, 32});
  for (const auto& [el, sc] : std::vector<std::pair<Tensor, Tensor>>{
           {q.elements, short_scale}, {long_elements, q.scale}, {wrong_dtype, q.scale}, {q.elements, q.elements}}) {
    try {
      mx_from_parts(m, el, sc, ErrorCode::kBadRequest, "t");
      ADD_FAILURE() << "accepted " << el.meta().str() << " + " << sc.meta().str();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadRequest) << e.message();
    }
  }
  // Descriptions: bad block sizes, axes and lengths, from an op (422 codes)
  // and from the wire (400).
  auto code_of = [](int64_t bs, int64_t axis, Shape shape, bool wire) {
    try {
      make_mx_meta(kernels::MxFormat::kFp6E2M3, bs, axis, std::move(shape), wire, "t");
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;  // accepted
  };
  EXPECT_EQ(code_of(32, -1, {2, 64}, false), ErrorCode::kInternal);
  EXPECT_EQ(code_of(30, -1, {2, 60}, false), ErrorCode::kInvalidArgument);  // FP6 needs multiples of 4
  EXPECT_EQ(code_of(32, 2, {2, 64}, false), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of(32, -3, {2, 64}, false), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of(32, 0, {2, 64}, false), ErrorCode::kShapeMismatch);
  EXPECT_EQ(code_of(32, -1, {}, false), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of(0, -1, {2, 64}, true), ErrorCode::kBadRequest);
  EXPECT_EQ(code_of(32, 0, {2, 64}, true), ErrorCode::kBadRequest);
  EXPECT_EQ(code_of(int64_t{1} << 21, -1, {int64_t{1} << 21}, true), ErrorCode::kBadRequest);
  EXPECT_EQ(code_of(32, -1, {int64_t{1} << 40, int64_t{1} << 40}, true), ErrorCode::kBadRequest);
}

TEST(MxTensor, CopiesKeepTheDescription) {
  Quantized q = quantize(f32_tensor({64, 2}, std::vector<float>(128, -3.0f)), "mxfp8_e5m2", 32, 0);
  Tensor c = q.q.clone();
  EXPECT_NE(c.data(), q.q.data());
  EXPECT_EQ(c.meta().str(), q.q.meta().str());
  EXPECT_EQ(bytes_of(c), bytes_of(q.q));
  EXPECT_EQ(c.nbytes(), 64u * 2 + 2u * 2);
  EXPECT_EQ(q.q.to_host().meta().str(), q.q.meta().str());
}

}  // namespace
}  // namespace tensord
