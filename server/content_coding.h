// HTTP content codings for the KServe routes (API.md 11.1): request bodies
// sent with Content-Encoding gzip or deflate (tritonclient's
// request_compression_algorithm) and answers compressed for an
// Accept-Encoding that asks (its response_compression_algorithm), with zlib.
// "deflate" is the zlib format (RFC 9110 8.4.1.2), as Python's zlib and
// libcurl write it; gzip is RFC 1952 (members one after another accepted).
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "api/http_types.h"

namespace tensord {

enum class ContentCoding { kGzip, kDeflate };

// "gzip" or "deflate", as the header and the errors name it.
const char* coding_name(ContentCoding c);
// zlib's windowBits for the coding's framing: 15 (the zlib format) plus 16
// for gzip's header and trailer.
int zlib_window_bits(ContentCoding c);

// A request's Content-Encoding: nullopt for none or "identity"; gzip
// (x-gzip) or deflate; any other coding, or more than one, is bad_request
// naming it.
std::optional<ContentCoding> request_coding(const std::string& content_encoding);

// The coding an Accept-Encoding header asks for: gzip before deflate, a
// q=0 one refused; nullopt when neither (identity).
std::optional<ContentCoding> accepted_coding(const std::string& accept_encoding);

// Inflates `in`, at most `grow_step` bytes at a time. The inflated size is
// checked as it grows: past `max_bytes` it stops with payload_too_large (a
// zip bomb ends there, nothing kept). Before each step `on_grow(total)`
// says how many bytes the output may hold once the step is written, and at
// the end how many it holds (less, or equal): the caller charges the tenant
// there, before the bytes are held; what it throws stops the inflation. A
// body that is not in the coding, or ends early, is bad_request.
std::string inflate_body(std::string_view in, ContentCoding coding, size_t max_bytes,
                         const std::function<void(size_t total)>& on_grow, size_t grow_step = size_t{1} << 20);

// Compresses the response's body and views into its body, in `coding`,
// and sets its Content-Encoding (and Vary) header. An empty body is left
// as it is.
void compress_response(HttpResponse& resp, ContentCoding coding);

}  // namespace tensord
