// Text that came from outside (a client's header, a program's node id, a
// config file) on its way into JSON: RapidJSON's writer copies a string's
// bytes as they are, so invalid UTF-8 in would be invalid JSON out. The one
// implementation behind api/'s error replies and the trace writer, which
// sits below api/ in the link order.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tensord {

// The offset of the first byte of `s` that is not part of a well-formed
// UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, nothing above
// U+10FFFF); npos when there is none. ASCII runs go eight bytes at a time:
// request bodies are checked whole at memory speed (api/json_parse.cpp).
size_t utf8_invalid_offset(std::string_view s);

// True when `s` is well-formed UTF-8.
inline bool is_valid_utf8(std::string_view s) {
  return utf8_invalid_offset(s) == std::string_view::npos;
}

// `s` with every byte that is not part of a well-formed UTF-8 sequence
// replaced by '?'; well-formed text (ASCII or not) is returned unchanged.
std::string valid_utf8(std::string_view s);

}  // namespace tensord
