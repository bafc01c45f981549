// SSE2 is x86-64's baseline: RapidJSON's reader then scans strings and
// whitespace 16 bytes at a time. This file is the only one that parses
// (before any RapidJSON header, its own included). Those scans load whole
// aligned 16-byte blocks, so they read up to 15 bytes past the text's end:
// never across a page, and ignored, but AddressSanitizer reports them, so
// sanitized builds scan byte by byte.
#if defined(__SANITIZE_ADDRESS__)
#define TENSORD_JSON_BYTEWISE
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TENSORD_JSON_BYTEWISE
#endif
#endif
#if defined(__SSE2__) && !defined(RAPIDJSON_SSE2) && !defined(TENSORD_JSON_BYTEWISE)
#define RAPIDJSON_SSE2
#endif
#include "api/json_parse.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

#include "metrics/utf8.h"
#include "ops/error.h"

namespace tensord {
namespace {

using rapidjson::SizeType;

// Forwards SAX events to the document, counting depth and converting the
// raw number text RapidJSON hands over (kParseNumbersAsStringsFlag).
class Handler {
 public:
  Handler(rapidjson::Document& doc, int max_depth) : doc_(doc), max_depth_(max_depth) {}

  // RapidJSON's SAX Handler concept names these methods.
  // NOLINTBEGIN(readability-identifier-naming)
  bool Null() { return doc_.Null(); }
  bool Bool(bool b) { return doc_.Bool(b); }
  bool Int(int i) { return doc_.Int(i); }
  bool Uint(unsigned u) { return doc_.Uint(u); }
  bool Int64(int64_t i) { return doc_.Int64(i); }
  bool Uint64(uint64_t u) { return doc_.Uint64(u); }
  bool Double(double d) { return doc_.Double(d); }
  bool String(const char* s, SizeType n, bool copy) { return doc_.String(s, n, copy); }
  bool Key(const char* s, SizeType n, bool copy) { return doc_.Key(s, n, copy); }
  bool StartObject() { return enter() && doc_.StartObject(); }
  bool EndObject(SizeType n) {
    --depth_;
    return doc_.EndObject(n);
  }
  bool StartArray() { return enter() && doc_.StartArray(); }
  bool EndArray(SizeType n) {
    --depth_;
    return doc_.EndArray(n);
  }

  // `s` already matches the JSON number grammar. It is NUL-terminated when
  // RapidJSON copied it; in situ the byte after it is the JSON delimiter
  // that follows the number, where strtod stops too.
  bool RawNumber(const char* s, SizeType n, bool /*copy*/) {
    const char* end = s + n;
    bool integral = true;
    for (const char* c = s; c != end; ++c) integral &= (*c != '.' && *c != 'e' && *c != 'E');
    if (integral) {
      if (*s == '-') {
        int64_t i;
        auto r = std::from_chars(s, end, i);
        if (r.ec == std::errc() && r.ptr == end) return doc_.Int64(i);
      } else {
        uint64_t u;
        auto r = std::from_chars(s, end, u);
        if (r.ec == std::errc() && r.ptr == end) return doc_.Uint64(u);
      }
      // Too big for 64 bits: a double, as RapidJSON does.
    }
    double d;
    auto r = std::from_chars(s, end, d);
    if (r.ec == std::errc::result_out_of_range) {
      d = std::strtod(s, nullptr);  // tells overflow (inf) from underflow (0 / subnormal)
      if (std::isinf(d)) {
        error_ = "number too big for a double";
        return false;
      }
    } else if (r.ec != std::errc() || r.ptr != end) {
      error_ = "invalid number";
      return false;
    }
    return doc_.Double(d);
  }
  // NOLINTEND(readability-identifier-naming)

  const std::string& error() const { return error_; }

 private:
  bool enter() {
    if (++depth_ > max_depth_) {
      error_ = "nested deeper than " + std::to_string(max_depth_) + " levels";
      return false;
    }
    return true;
  }

  rapidjson::Document& doc_;
  int max_depth_;
  int depth_ = 0;
  std::string error_;
};

// Parses `is` into `doc` through the Handler with `kFlags`; on failure
// `doc` is null and the error names the offset and the reason.
template <unsigned kFlags, class Stream>
void populate(Stream& is, rapidjson::Document& doc, const std::string& what, int max_depth) {
  rapidjson::ParseResult result;
  Handler handler(doc, max_depth);
  auto generate = [&](rapidjson::Document&) {
    rapidjson::Reader reader;
    result = reader.Parse<kFlags | rapidjson::kParseIterativeFlag | rapidjson::kParseNumbersAsStringsFlag>(is, handler);
    return !result.IsError();
  };
  doc.Populate(generate);
  if (!result.IsError()) return;
  doc.SetNull();
  std::string reason = handler.error().empty() ? rapidjson::GetParseError_En(result.Code()) : handler.error();
  throw Error(ErrorCode::kBadRequest,
              what + ": invalid JSON at offset " + std::to_string(result.Offset()) + ": " + reason);
}

// What both entry points refuse before parsing: a NUL byte (RapidJSON would
// read it as the end) and invalid UTF-8 anywhere, checked in one pass at
// memory speed (so the parser may take its SIMD scans). A byte-order mark
// is valid UTF-8: both skip it (RFC 8259 lets a parser ignore one).
void check_text(std::string_view text, const std::string& what) {
  if (size_t z = text.find('\0'); z != std::string_view::npos) {
    throw Error(ErrorCode::kBadRequest, what + ": invalid JSON: it contains a NUL byte at offset " + std::to_string(z));
  }
  if (size_t bad = utf8_invalid_offset(text); bad != std::string_view::npos) {
    throw Error(ErrorCode::kBadRequest,
                what + ": invalid JSON at offset " + std::to_string(bad) + ": invalid UTF-8 in the text");
  }
}

constexpr std::string_view kBom = "\xEF\xBB\xBF";

}  // namespace

void parse_json_insitu(std::string& text, rapidjson::Document& doc, const std::string& what, int max_depth) {
  check_text(text, what);
  const size_t bom = std::string_view(text).substr(0, 3) == kBom ? 3 : 0;
  rapidjson::InsituStringStream is(text.data() + bom);  // text.data()[text.size()] is NUL: the end
  populate<rapidjson::kParseInsituFlag>(is, doc, what, max_depth);
}

void parse_json(std::string_view text, rapidjson::Document& doc, const std::string& what, int max_depth) {
  check_text(text, what);
  // EncodedInputStream skips a byte-order mark (and would skip a lone 0xEF,
  // which check_text has refused already).
  rapidjson::MemoryStream ms(text.data(), text.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> is(ms);
  populate<rapidjson::kParseValidateEncodingFlag>(is, doc, what, max_depth);
}

}  // namespace tensord
