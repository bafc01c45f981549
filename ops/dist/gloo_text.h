// Gloo's messages begin with the source position that raised them
// ("[./gloo/rendezvous/redis_store.cc:93] Server closed the connection"):
// an answer carries the words after it, which are what an operator can act
// on; internal paths do not belong in an answer (API.md 2).
#pragma once

#include <string>
#include <string_view>

namespace tensord::dist {

inline std::string without_source_position(std::string_view m) {
  if (!m.empty() && m.front() == '[') {
    const auto end = m.find("] ");
    if (end != std::string_view::npos) m.remove_prefix(end + 2);
  }
  return std::string(m);
}

}  // namespace tensord::dist
