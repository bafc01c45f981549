// The one place that maps tensord::Error to an HTTP reply (API.md section 2;
// Seastar's routes::exception_reply).
#pragma once

#include <string>

#include "api/http_types.h"
#include "ops/error.h"

namespace tensord {

// HTTP status for an error code.
int http_status(ErrorCode code);

// {"error": {"code", "message", "node"?, "request_id"}} with the status;
// 429 and 503 replies carry Retry-After: `retry_after_s` when > 0, else the error's
// own estimate (e.retry_after_s(): the queue's drain rate), else 1.
HttpResponse error_reply(const Error& e, const std::string& request_id, int retry_after_s = 0);

// Escapes a string as a JSON string literal (with the quotes).
std::string json_quote(const std::string& s);

}  // namespace tensord
