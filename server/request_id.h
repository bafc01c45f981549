// X-Request-Id handling (API.md section 1).
#pragma once

#include <string>
#include <string_view>

namespace tensord {

// A client-sent id is echoed when it is 1..128 printable ASCII characters.
bool is_sane_request_id(std::string_view id);

// 16 lower-case hex characters from a per-thread PRNG. Thread-safe.
std::string new_request_id();

// The client's id when sane, else a fresh one.
std::string request_id_for(std::string_view client_id);

}  // namespace tensord
