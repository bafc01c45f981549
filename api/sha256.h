// SHA-256 (FIPS 180-4), for program digests and token hashes.
#pragma once

#include <string>
#include <string_view>

namespace tensord {

// Lower-case hex digest of `data`.
std::string sha256_hex(std::string_view data);

}  // namespace tensord
