#include "api/utf8.h"

#include <cstdint>
#include <cstring>

namespace tensord {
namespace {

// Length of the valid sequence starting at p[0] (a non-ASCII lead byte),
// or 0. Ranges are Unicode's Table 3-7 (well-formed UTF-8 byte sequences).
size_t sequence_length(const unsigned char* p, size_t left) {
  const unsigned char c = p[0];
  auto cont = [&](size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return i < left && p[i] >= lo && p[i] <= hi;
  };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;        // no overlong
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;  // no surrogates
  if (c >= 0xE1 && c <= 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;  // no overlong
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;  // <= U+10FFFF
  return 0;
}

}  // namespace

size_t utf8_invalid_offset(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // ASCII runs, eight bytes at a time (JSON bodies are almost all ASCII).
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const size_t len = sequence_length(p + i, n - i);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace tensord
