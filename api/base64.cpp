#include "api/base64.h"

#include <array>
#include <cstdint>

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

std::string base64_encode(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out((n + 2) / 3 * 4, '=');
  size_t o = 0, i = 0;
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
    if (rest == 2) out[o++] = kAlphabet[(v >> 6) & 63];
  }
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
  for (size_t g = 0; g < full; ++g) {
    size_t k = g * 4;
    uint32_t v =
        (sextet(text, k) << 18) | (sextet(text, k + 1) << 12) | (sextet(text, k + 2) << 6) | sextet(text, k + 3);
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
