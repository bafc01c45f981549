#include "api/error_reply.h"

#include "metrics/json_escape.h"

namespace tensord {

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadRequest:
    case ErrorCode::kInvalidProgram:
      return 400;
    case ErrorCode::kUnauthenticated:
      return 401;
    case ErrorCode::kForbidden:
      return 403;
    case ErrorCode::kNotFound:
    case ErrorCode::kUnknownOp:
      return 404;
    case ErrorCode::kConflict:
      return 409;
    case ErrorCode::kPayloadTooLarge:
      return 413;
    case ErrorCode::kShapeMismatch:
    case ErrorCode::kDtypeMismatch:
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNumericalError:
    case ErrorCode::kUnsupported:
      return 422;
    case ErrorCode::kQuotaExceeded:
    case ErrorCode::kQueueFull:
      return 429;
    case ErrorCode::kCancelled:
      return 499;
    case ErrorCode::kInternal:
      return 500;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kDeadlineExceeded:
      return 504;
  }
  return 500;
}

std::string json_quote(const std::string& s) {
  return '"' + json_escape(s) + '"';
}

namespace {
// Messages may echo user input: keep them bounded and valid UTF-8-ish.
std::string clip(const std::string& s) {
  std::string out = s.size() > 2048 ? s.substr(0, 2048) + "..." : s;
  for (auto& c : out) {
    if (static_cast<unsigned char>(c) >= 0x80) c = '?';
  }
  return out;
}
}  // namespace

HttpResponse error_reply(const Error& e, const std::string& request_id, int retry_after_s) {
  HttpResponse r;
  r.status = http_status(e.code());
  std::string body = "{\"error\":{\"code\":";
  body += json_quote(std::string(error_code_name(e.code())));
  body += ",\"message\":" + json_quote(clip(e.message()));
  if (!e.node().empty()) body += ",\"node\":" + json_quote(clip(e.node()));
  body += ",\"request_id\":" + json_quote(request_id) + "}}";
  r.body = std::move(body);
  if (r.status == 429 || r.status == 503) {  // 503: draining or not ready; a retry elsewhere or later works
    int ra = retry_after_s > 0 ? retry_after_s : e.retry_after_s();
    r.headers.emplace_back("Retry-After", std::to_string(ra < 1 ? 1 : ra));
  }
  if (r.status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"tensord\"");
  return r;
}

}  // namespace tensord
