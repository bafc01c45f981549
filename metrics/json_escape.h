// Escaping a string for the body of a JSON string: the one implementation
// behind api/'s json_quote (error replies) and the trace writer, which sits
// below api/ in the link order.
#pragma once

#include <string>

namespace tensord {

// `s` escaped for a JSON string body (no quotes added): quote, backslash,
// \n \r \t, and every other control byte (and DEL) as \u00XX.
std::string json_escape(const std::string& s);

}  // namespace tensord
