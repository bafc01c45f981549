#include "api/base64_avx2.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tensord {

// Per 32 characters: classify each by its nibbles (valid iff the bits its
// low nibble names and those its high nibble names do not meet), map it to
// its sextet by adding an offset chosen by its high nibble ('/' gets its
// own), then pack four sextets into three bytes with two multiply-adds and
// a byte shuffle. The tables follow from the alphabet:
//   high nibble 2: '+' (lo 11) and '/' (lo 15); 3: digits (lo 0-9);
//   4 and 6: letters from lo 1; 5 and 7: letters up to lo 10; others: none.
size_t base64_decode_groups_avx2(const unsigned char* in, size_t groups, unsigned char* out, size_t out_bytes) {
  // Bit per high-nibble class: 0x01 (2), 0x02 (3), 0x04 (4, 6), 0x08 (5, 7),
  // 0x10 (never valid). lut_lo[lo]: the classes in which `lo` is invalid.
  const __m256i lut_lo =
      _mm256_setr_epi8(0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A, 0x1B, 0x1B, 0x1B, 0x1A,
                       0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A, 0x1B, 0x1B, 0x1B, 0x1A);
  const __m256i lut_hi =
      _mm256_setr_epi8(0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10,
                       0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10);
  // Offsets by high nibble; index 1 is '/' (high nibble 2, minus one).
  const __m256i lut_roll = _mm256_setr_epi8(0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 19, 4, -65,
                                            -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i slash = _mm256_set1_epi8('/');
  const __m256i pair = _mm256_set1_epi32(0x01400140);  // a << 6 | b per 16 bits
  const __m256i quad = _mm256_set1_epi32(0x00011000);  // ab << 12 | cd per 32 bits
  const __m256i order = _mm256_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1,  //
                                         2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
  const __m256i pack = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
  size_t g = 0;
  while (g + 8 <= groups && g * 3 + 32 <= out_bytes) {
    const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + g * 4));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(s, 4), nibble);
    const __m256i lo = _mm256_and_si256(s, nibble);
    if (!_mm256_testz_si256(_mm256_shuffle_epi8(lut_lo, lo), _mm256_shuffle_epi8(lut_hi, hi))) break;
    const __m256i roll = _mm256_shuffle_epi8(lut_roll, _mm256_add_epi8(_mm256_cmpeq_epi8(s, slash), hi));
    const __m256i sextets = _mm256_add_epi8(s, roll);
    const __m256i merged = _mm256_madd_epi16(_mm256_maddubs_epi16(sextets, pair), quad);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(merged, order), pack);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + g * 3), bytes);  // 24 bytes meant, 32 written
    g += 8;
  }
  return g;
}

// Per 24 bytes: two 12-byte lane loads, a shuffle that puts each 3-byte
// group's bytes [a b c] in a 32-bit word as [b a c b], two multiplies that
// move the four 6-bit fields to the bottoms of the word's four bytes, then
// the alphabet by adding an offset looked up by the sextet's class:
// 0-25 'A'.., 26-51 'a'.., 52-61 '0'.., 62 '+', 63 '/'.
size_t base64_encode_groups_avx2(const unsigned char* in, size_t n, char* out) {
  const __m256i spread = _mm256_setr_epi8(1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10,  //
                                          1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10);
  const __m256i mask_ac = _mm256_set1_epi32(0x0fc0fc00);
  const __m256i mul_ac = _mm256_set1_epi32(0x04000040);
  const __m256i mask_bd = _mm256_set1_epi32(0x003f03f0);
  const __m256i mul_bd = _mm256_set1_epi32(0x01000010);
  // Index by class: 0 (26-51), 1-10 (52-61), 11 (62), 12 (63), 13 (0-25).
  const __m256i offsets = _mm256_setr_epi8(71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 65, 0, 0,  //
                                           71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 65, 0, 0);
  const __m256i fifty_one = _mm256_set1_epi8(51);
  const __m256i twenty_six = _mm256_set1_epi8(26);
  const __m256i thirteen = _mm256_set1_epi8(13);
  size_t i = 0;
  while (i + 28 <= n) {  // the high lane's 16-byte load reads 4 bytes past the 24 used
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 12));
    const __m256i v = _mm256_shuffle_epi8(_mm256_set_m128i(hi, lo), spread);
    const __m256i ac = _mm256_mulhi_epu16(_mm256_and_si256(v, mask_ac), mul_ac);
    const __m256i bd = _mm256_mullo_epi16(_mm256_and_si256(v, mask_bd), mul_bd);
    const __m256i sextets = _mm256_or_si256(ac, bd);
    __m256i cls = _mm256_subs_epu8(sextets, fifty_one);
    cls = _mm256_or_si256(cls, _mm256_and_si256(_mm256_cmpgt_epi8(twenty_six, sextets), thirteen));
    const __m256i text = _mm256_add_epi8(sextets, _mm256_shuffle_epi8(offsets, cls));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i / 3 * 4), text);
    i += 24;
  }
  return i;
}

}  // namespace tensord
#endif
