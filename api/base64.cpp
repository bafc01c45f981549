#include "api/base64.h"

#include <array>
#include <cstdint>

#include "api/base64_avx2.h"
#include "ops/error.h"

namespace tensord {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr uint8_t kInvalid = 0xff;

constexpr std::array<uint8_t, 256> make_table() {
  std::array<uint8_t, 256> t{};
  for (auto& x : t) x = kInvalid;
  for (uint8_t i = 0; i < 64; ++i) t[static_cast<uint8_t>(kAlphabet[i])] = i;
  return t;
}
constexpr std::array<uint8_t, 256> kTable = make_table();

// The decoder's tables: a character's sextet already shifted to its place
// in the group's 24 bits, and kBad (no valid group sets bit 24) for a
// character outside the alphabet, so a group is four loads and three ORs
// and one test finds any bad character among them.
constexpr uint32_t kBad = 1u << 24;
constexpr std::array<uint32_t, 256> make_shifted(int shift) {
  std::array<uint32_t, 256> t{};
  for (size_t c = 0; c < 256; ++c) t[c] = kTable[c] == kInvalid ? kBad : uint32_t{kTable[c]} << shift;
  return t;
}
constexpr std::array<uint32_t, 256> kD0 = make_shifted(18), kD1 = make_shifted(12), kD2 = make_shifted(6),
                                    kD3 = make_shifted(0);

[[noreturn]] void bad_char(std::string_view text, size_t pos) {
  unsigned char c = static_cast<unsigned char>(text[pos]);
  std::string shown =
      (c >= 0x20 && c < 0x7f) ? std::string("'") + static_cast<char>(c) + "'" : "byte " + std::to_string(c);
  throw Error(ErrorCode::kBadRequest, "invalid base64: " + shown + " at offset " + std::to_string(pos));
}

uint32_t sextet(std::string_view text, size_t pos) {
  uint8_t v = kTable[static_cast<unsigned char>(text[pos])];
  if (v == kInvalid) bad_char(text, pos);
  return v;
}

}  // namespace

size_t base64_encoded_size(size_t n) {
  return (n + 2) / 3 * 4;
}

void base64_encode_into(const void* data, size_t n, char* out) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t o = 0, i = 0;
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) {
    i = base64_encode_groups_avx2(p, n, out);
    o = i / 3 * 4;
  }
#endif
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8) | p[i + 2];
    out[o++] = kAlphabet[(v >> 18) & 63];
    out[o++] = kAlphabet[(v >> 12) & 63];
    out[o++] = kAlphabet[(v >> 6) & 63];
    out[o++] = kAlphabet[v & 63];
  }
  if (size_t rest = n - i; rest > 0) {
    uint32_t v = uint32_t{p[i]} << 16;
    if (rest == 2) v |= uint32_t{p[i + 1]} << 8;
    out[o++] = kAlphabet[(v >> 18) & 63];
    out[o++] = kAlphabet[(v >> 12) & 63];
    out[o++] = rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out[o++] = '=';
  }
}

std::string base64_encode(const void* data, size_t n) {
  std::string out(base64_encoded_size(n), '\0');
  base64_encode_into(data, n, out.data());
  return out;
}

size_t base64_decoded_size(std::string_view text) {
  if (text.size() % 4 != 0) {
    throw Error(ErrorCode::kBadRequest, "invalid base64: length " + std::to_string(text.size()) +
                                            " is not a multiple of 4 (padding '=' is required)");
  }
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') pad = text[text.size() - 2] == '=' ? 2 : 1;
  return text.size() / 4 * 3 - pad;
}

void base64_decode_into(std::string_view text, void* out) {
  size_t total = base64_decoded_size(text);
  auto* o = static_cast<unsigned char*>(out);
  size_t groups = text.size() / 4;
  size_t full = total / 3;  // groups without padding
  const auto* in = reinterpret_cast<const unsigned char*>(text.data());
  size_t g = 0;
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) g = base64_decode_groups_avx2(in, full, o, total);
#endif
  for (; g < full; ++g) {
    const unsigned char* q = in + g * 4;
    const uint32_t v = kD0[q[0]] | kD1[q[1]] | kD2[q[2]] | kD3[q[3]];
    if (v & kBad) {
      for (size_t k = g * 4; k < g * 4 + 4; ++k) sextet(text, k);  // throws, naming the first bad one
    }
    o[g * 3] = static_cast<unsigned char>(v >> 16);
    o[g * 3 + 1] = static_cast<unsigned char>(v >> 8);
    o[g * 3 + 2] = static_cast<unsigned char>(v);
  }
  if (full == groups) return;
  // The last group carries 1 or 2 bytes and 2 or 1 '='.
  size_t k = full * 4;
  size_t rest = total - full * 3;
  uint32_t v = (sextet(text, k) << 18) | (sextet(text, k + 1) << 12);
  if (rest == 2) v |= sextet(text, k + 2) << 6;
  // A '=' anywhere but the padding positions was caught by sextet(); the
  // unused low bits must be zero in canonical base64.
  if ((rest == 1 && (v & 0xffffu) != 0) || (rest == 2 && (v & 0xffu) != 0)) {
    throw Error(ErrorCode::kBadRequest,
                "invalid base64: non-zero bits before the padding at offset " + std::to_string(k + rest));
  }
  o[full * 3] = static_cast<unsigned char>(v >> 16);
  if (rest == 2) o[full * 3 + 1] = static_cast<unsigned char>(v >> 8);
}

std::string base64_decode(std::string_view text) {
  std::string out(base64_decoded_size(text), '\0');
  base64_decode_into(text, out.data());
  return out;
}

}  // namespace tensord
