// Finding a key of a JSON text's top-level object without parsing the
// text: what comes before the key is scanned (strings skipped a memchr at a
// time, depth tracked), the rest is not read. Serves the paths that cut a
// large value out of a body before parsing the rest (json_tensor.cpp,
// json_numbers.cpp) and the decoder of a body still arriving
// (json_b64_stream.cpp).
#pragma once

#include <cstddef>
#include <string_view>

namespace tensord {

inline bool json_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// What top_level_value answers when it finds no value: the text ends
// before the answer is known (a body's first bytes), or the top-level
// object has no such key (or the text is no object).
inline constexpr size_t kJsonMore = static_cast<size_t>(-1);
inline constexpr size_t kJsonAbsent = static_cast<size_t>(-2);

// The offset of the first character of the value of the top-level
// object's first `key` (a key, not a string value that reads the same),
// or kJsonMore / kJsonAbsent. The text before it need not be valid JSON:
// whoever uses the value parses the text around it.
size_t top_level_value(std::string_view text, std::string_view key);

// The offset of the quote that closes the string whose characters start
// at `i` (a quote is escaped when an odd run of backslashes precedes it),
// or text.size().
size_t json_string_end(std::string_view text, size_t i);

}  // namespace tensord
