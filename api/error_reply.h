// The one place that maps tensord::Error to an HTTP reply (API.md sections 2 and 11;
// Seastar's routes::exception_reply), and the error replies of the HTTP
// layer itself that no ErrorCode names (405, 426, the last-resort 500).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "api/http_types.h"
#include "ops/error.h"

namespace tensord {

// HTTP status for an error code.
int http_status(ErrorCode code);

// {"error": {"code", "message", "node"?, "request_id"?}}: the error body of
// API.md section 2. Messages and node ids are cut to 2048 bytes and made
// valid UTF-8 (they may echo the request); node is left out when empty,
// request_id when absent.
std::string error_json(std::string_view code, const std::string& message, const std::string& node,
                       std::optional<std::string_view> request_id);

// The shape of an error body: tensord's (API.md 2) or KServe v2's
// {"error": "<message>"} (API.md 11), which the /v2 routes answer.
enum class ErrorStyle { kTensord, kKServe };

// kKServe for "/v2" and every path or route template under "/v2/" (a query
// after '?' is ignored), else kTensord.
ErrorStyle error_style_for(std::string_view path);

// {"error": {"code", "message", "node"?, "request_id"}} (kKServe:
// {"error": "<message>"}) with the status; 429 and 503 replies carry
// Retry-After: `retry_after_s` when > 0, else the error's own estimate
// (e.retry_after_s(): the queue's drain rate), else 1.
HttpResponse error_reply(const Error& e, const std::string& request_id, int retry_after_s = 0,
                         ErrorStyle style = ErrorStyle::kTensord);

// 405 with Allow: `allowed` (RFC 9110 15.5.6) and the error body with the
// code "method_not_allowed" (API.md section 2 has no code for a wrong
// method on a known path).
HttpResponse method_not_allowed_reply(const std::string& message, const std::string& allowed,
                                      const std::string& request_id, ErrorStyle style = ErrorStyle::kTensord);

// 426 with Upgrade: `protocol` and a bad_request body (a plain GET of a
// WebSocket route).
HttpResponse upgrade_required_reply(const std::string& message, const std::string& protocol,
                                    const std::string& request_id);

// A fixed 500 {"error": {"code": "internal", "message": "internal error"}},
// rendered once at start: what a session answers when error_reply itself
// failed.
HttpResponse fallback_error_reply();

}  // namespace tensord
