// Strict base64 (RFC 4648 section 4, standard alphabet, '=' padding) for
// tensor bytes in JSON (API.md 3.1). Decoding rejects anything an encoder
// would not produce: characters outside the alphabet (whitespace included),
// a length that is not a multiple of 4, misplaced or missing padding and
// non-zero bits in the last character before the padding. Every rejection is
// Error(kBadRequest).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tensord {

// Characters n bytes encode to (padding included).
size_t base64_encoded_size(size_t n);
// Writes base64_encoded_size(n) characters to `out` (no terminator).
void base64_encode_into(const void* data, size_t n, char* out);
std::string base64_encode(const void* data, size_t n);
inline std::string base64_encode(std::string_view bytes) {
  return base64_encode(bytes.data(), bytes.size());
}

// Number of bytes `text` decodes to; throws bad_request when its length or
// padding is malformed (characters are checked by base64_decode_into).
size_t base64_decoded_size(std::string_view text);
// Decodes `text` into `out`, which holds base64_decoded_size(text) bytes.
void base64_decode_into(std::string_view text, void* out);
std::string base64_decode(std::string_view text);

}  // namespace tensord
