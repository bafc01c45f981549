// The one JSON writer of api/'s encoders: RapidJSON's Writer into a
// StringBuffer (compact, strings escaped), with helpers for the string
// types the encoders hold.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "api/http_types.h"

namespace tensord {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

inline void write_key(JsonWriter& w, std::string_view k) {
  w.Key(k.data(), static_cast<rapidjson::SizeType>(k.size()));
}

// Text the writer copies as it is: it must be valid UTF-8 (what parsed
// JSON, the registry and the config give). Text that may not be (an error
// message echoing input) goes through valid_utf8 (metrics/utf8.h) first.
inline void write_string(JsonWriter& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// What the writer wrote.
inline std::string json_text(const rapidjson::StringBuffer& sb) {
  return std::string(sb.GetString(), sb.GetSize());
}

// The writer's buffer as a response body (HttpResponse::views): the text
// leaves from the buffer it was written into, not from a copy of it in a
// string.
inline BodyView json_body(std::shared_ptr<rapidjson::StringBuffer> sb) {
  BodyView v{sb->GetString(), sb->GetSize(), nullptr, {}};
  v.owner = std::move(sb);
  return v;
}

}  // namespace tensord
