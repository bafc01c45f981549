// Request-target parsing for the session: the path and query of an
// origin-form target, percent-decoded. Transport-neutral (no Beast).
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace tensord {

// Decodes %XX escapes (and '+' as space when plus_is_space, for queries).
// Throws Error(kBadRequest) on a malformed escape or a decoded NUL byte.
std::string percent_decode(std::string_view in, bool plus_is_space);

// Splits "/a/b?x=1&y" into the decoded path "/a/b" and query {x:1, y:""}.
// A repeated key keeps its last value. The target must start with '/'.
// Throws Error(kBadRequest) on anything else.
void parse_target(std::string_view target, std::string& path, std::map<std::string, std::string>& query);

}  // namespace tensord
