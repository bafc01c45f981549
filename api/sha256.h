// SHA-256 (FIPS 180-4), for program digests and token hashes.
#pragma once

#include <string>
#include <string_view>

namespace tensord {

// Lower-case hex digest of `data`: with the CPU's SHA extensions where it
// has them (x86-64 SHA-NI), else portable code.
std::string sha256_hex(std::string_view data);
// The same, the extensions used only when `cpu_extensions` (the tests run
// both paths) and the CPU has them; whether it has them.
std::string sha256_hex(std::string_view data, bool cpu_extensions);
bool sha256_cpu_extensions();

}  // namespace tensord
