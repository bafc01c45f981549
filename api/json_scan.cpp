#include "api/json_scan.h"

#include <cstring>

namespace tensord {

size_t json_string_end(std::string_view s, size_t i) {
  while (i < s.size()) {
    const void* q = std::memchr(s.data() + i, '"', s.size() - i);
    if (!q) return s.size();
    const size_t at = static_cast<size_t>(static_cast<const char*>(q) - s.data());
    size_t slashes = 0;
    while (at - slashes > i && s[at - slashes - 1] == '\\') ++slashes;
    if (slashes % 2 == 0) return at;
    i = at + 1;
  }
  return s.size();
}

size_t top_level_value(std::string_view s, std::string_view key) {
  const size_t n = s.size();
  size_t i = 0;
  auto skip_space = [&] {
    while (i < n && json_space(s[i])) ++i;
  };
  skip_space();
  if (i == n) return kJsonMore;
  if (s[i] != '{') return kJsonAbsent;
  ++i;
  int depth = 1;
  while (i < n) {
    const char c = s[i];
    if (c == '"') {
      const size_t start = ++i;
      i = json_string_end(s, i);
      if (i >= n) return kJsonMore;
      const bool match = depth == 1 && s.substr(start, i - start) == key;
      ++i;
      if (!match) continue;
      skip_space();
      if (i == n) return kJsonMore;
      if (s[i] != ':') continue;  // the key's name as a value
      ++i;
      skip_space();
      return i < n ? i : kJsonMore;
    }
    if (c == '{' || c == '[') ++depth;
    if ((c == '}' || c == ']') && --depth == 0) return kJsonAbsent;
    ++i;
  }
  return kJsonMore;
}

}  // namespace tensord
