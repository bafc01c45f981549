// Counter-based random numbers shared by the CPU and CUDA kernels of rand and
// randn: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3", SC'11; the generator of Random123 and cuRAND) and the transforms
// from random bits to uniform and normal values.
//
// Why counter-based: element i of a generated tensor depends only on
// (seed, i), so any split of the work over threads or GPU blocks gives
// bit-identical results.
//
// Layout (the contract both backends follow): the key is the 64-bit seed
// {lo32, hi32}; the counter of block b is {lo32(b), hi32(b), 0, 0}. One block
// gives four 32-bit words. A stream of float32 values uses one word per value
// (value j = word j % 4 of block j / 4); a stream of float64 values uses two
// words per value (value j = words 2*(j % 2), 2*(j % 2) + 1 of block j / 2).
// Box-Muller pairs consecutive values (2k, 2k + 1) of the same block.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/kernels/common.h"

namespace tensord::kernels {

struct Philox4x32 {
  uint32_t v[4];
};

TENSORD_INLINE uint32_t philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

// Philox4x32 with 10 rounds on counter `c` under key {k0, k1}.
TENSORD_INLINE Philox4x32 philox4x32_10(Philox4x32 c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    uint32_t lo0 = philox_mulhilo(kM0, c.v[0], &hi0);
    uint32_t lo1 = philox_mulhilo(kM1, c.v[2], &hi1);
    c = Philox4x32{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
    k0 += kW0;
    k1 += kW1;
  }
  return c;
}

// The four words of block `block` of the stream keyed by `seed`.
TENSORD_INLINE Philox4x32 philox_block(uint64_t seed, uint64_t block) {
  Philox4x32 c{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u}};
  return philox4x32_10(c, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Uniform in [0, 1) from the top `bits` bits of a word (bits <= 24): exactly
// representable in float32, and in float16 (bits = 11) / bfloat16 (bits = 8)
// so that rounding to the narrow type can never produce 1.0.
TENSORD_INLINE float uniform_float(uint32_t x, int bits) {
  return static_cast<float>(x >> (32 - bits)) * (1.0f / static_cast<float>(1u << bits));
}

// Uniform in [0, 1) from 53 random bits of two words.
TENSORD_INLINE double uniform_double(uint32_t hi, uint32_t lo) {
  uint64_t x = ((static_cast<uint64_t>(hi) << 32) | lo) >> 11;
  return static_cast<double>(x) * (1.0 / 9007199254740992.0);  // 2^-53
}

// Two standard normals from two words (Box-Muller, computed in float).
TENSORD_INLINE void normal_pair_float(uint32_t x0, uint32_t x1, float* z0, float* z1) {
  // u1 in (0, 1] keeps the log finite; u2 in [0, 1).
  float u1 = static_cast<float>((x0 >> 8) + 1u) * (1.0f / 16777216.0f);
  float u2 = static_cast<float>(x1 >> 8) * (1.0f / 16777216.0f);
  float r = sqrtf(-2.0f * logf(u1));
  float theta = 6.2831853071795864769f * u2;
  *z0 = r * cosf(theta);
  *z1 = r * sinf(theta);
}

// Two standard normals from four words (Box-Muller, computed in double).
TENSORD_INLINE void normal_pair_double(Philox4x32 w, double* z0, double* z1) {
  double u1 = 1.0 - uniform_double(w.v[0], w.v[1]);  // (0, 1]
  double u2 = uniform_double(w.v[2], w.v[3]);
  double r = sqrt(-2.0 * log(u1));
  double theta = 6.283185307179586476925 * u2;
  *z0 = r * cos(theta);
  *z1 = r * sin(theta);
}

}  // namespace tensord::kernels
