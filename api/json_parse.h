// Parsing untrusted JSON text (request bodies, safetensors headers) into a
// RapidJSON document. Use this instead of Document::Parse: it is iterative
// (deep nesting cannot overflow the stack) and bounded (max_depth), validates
// UTF-8, rejects NUL bytes (RapidJSON reads a NUL as the end of input), and
// converts numbers with std::from_chars, correctly rounded. RapidJSON 1.1.0's
// own number parsing is either approximate (the default: float64 values may
// be off by an ulp) or, with kParseFullPrecisionFlag, has known bugs ("0e100"
// is undefined behaviour, 0.000...0 with 23+ zeros parses to garbage).
// Number types are as RapidJSON's: integers are Int64/Uint64 when they fit,
// everything else is a double; a number too big for a double is an error.
#pragma once

#include <string>
#include <string_view>

#include <rapidjson/document.h>

namespace tensord {

inline constexpr int kMaxJsonDepth = 64;

// Throws Error(kBadRequest, "<what>: invalid JSON at offset N: <reason>").
void parse_json(std::string_view text, rapidjson::Document& doc, const std::string& what,
                int max_depth = kMaxJsonDepth);

// The same for a request body, in place: `doc`'s strings point into `text`
// (unescaped there), so nothing is copied and `text` must outlive `doc`.
// UTF-8 is validated in one pass over the whole text first.
void parse_json_insitu(std::string& text, rapidjson::Document& doc, const std::string& what,
                       int max_depth = kMaxJsonDepth);

}  // namespace tensord
