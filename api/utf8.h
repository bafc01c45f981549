// UTF-8 validation of untrusted text (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), eight ASCII bytes at a time: a
// request body is checked once, at memory speed, before it is parsed.
#pragma once

#include <cstddef>
#include <string_view>

namespace tensord {

// The offset of the first byte that does not start (or continue) a valid
// UTF-8 sequence; npos when the whole text is valid.
size_t utf8_invalid_offset(std::string_view text);

}  // namespace tensord
