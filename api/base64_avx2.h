// The bulk of base64 decoding and encoding, 32 characters (24 bytes) per
// step with AVX2; the caller (api/base64.cpp) picks it at run time by CPUID and decodes the
// rest, and any block with a bad character, with its scalar loop.
#pragma once

#include <cstddef>

namespace tensord {

// Decodes whole 4-character groups from `in` into `out` while at least 8
// groups are left and the 32-byte store stays inside `out_bytes`; stops at
// the first 32-character block holding a character outside the alphabet.
// Returns the number of groups decoded. Defined on x86-64 only.
size_t base64_decode_groups_avx2(const unsigned char* in, size_t groups, unsigned char* out, size_t out_bytes);

// Encodes whole 24-byte blocks of `in` (n bytes) into `out` (32 characters
// each) while 28 bytes are left to read; returns the bytes encoded (a
// multiple of 24), the rest is the caller's. Defined on x86-64 only.
size_t base64_encode_groups_avx2(const unsigned char* in, size_t n, char* out);

}  // namespace tensord
