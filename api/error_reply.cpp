#include "api/error_reply.h"

#include "api/json_writer.h"
#include "metrics/utf8.h"

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

namespace {

// Messages may echo user input: keep them bounded and valid UTF-8 (a cut
// through a multi-byte character leaves a '?').
std::string clip(const std::string& s) {
  constexpr size_t kMax = 2048;
  return s.size() > kMax ? valid_utf8(std::string_view(s).substr(0, kMax)) + "..." : valid_utf8(s);
}

// KServe v2's error body (API.md 11).
std::string kserve_error_json(const std::string& message) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("error");
  write_string(w, clip(message));
  w.EndObject();
  return json_text(sb);
}

const std::string kFallbackBody = error_json("internal", "internal error", "", std::nullopt);

}  // namespace

std::string error_json(std::string_view code, const std::string& message, const std::string& node,
                       std::optional<std::string_view> request_id) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("error");
  w.StartObject();
  w.Key("code");
  write_string(w, code);
  w.Key("message");
  write_string(w, clip(message));
  if (!node.empty()) {
    w.Key("node");
    write_string(w, clip(node));
  }
  if (request_id) {
    w.Key("request_id");
    write_string(w, valid_utf8(*request_id));
  }
  w.EndObject();
  w.EndObject();
  return json_text(sb);
}

ErrorStyle error_style_for(std::string_view path) {
  path = path.substr(0, path.find('?'));
  return path == "/v2" || path.starts_with("/v2/") ? ErrorStyle::kKServe : ErrorStyle::kTensord;
}

HttpResponse error_reply(const Error& e, const std::string& request_id, int retry_after_s, ErrorStyle style) {
  HttpResponse r;
  r.status = http_status(e.code());
  r.body = style == ErrorStyle::kKServe ? kserve_error_json(e.message())
                                        : error_json(error_code_name(e.code()), e.message(), e.node(), request_id);
  if (r.status == 429 || r.status == 503) {  // 503: draining or not ready; a retry elsewhere or later works
    int ra = retry_after_s > 0 ? retry_after_s : e.retry_after_s();
    r.headers.emplace_back("Retry-After", std::to_string(ra < 1 ? 1 : ra));
  }
  if (r.status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"tensord\"");
  return r;
}

HttpResponse method_not_allowed_reply(const std::string& message, const std::string& allowed,
                                      const std::string& request_id, ErrorStyle style) {
  HttpResponse r;
  r.status = 405;
  r.headers.emplace_back("Allow", allowed);
  r.body = style == ErrorStyle::kKServe ? kserve_error_json(message)
                                        : error_json("method_not_allowed", message, "", request_id);
  return r;
}

HttpResponse upgrade_required_reply(const std::string& message, const std::string& protocol,
                                    const std::string& request_id) {
  HttpResponse r;
  r.status = 426;
  r.headers.emplace_back("Upgrade", protocol);
  r.body = error_json(error_code_name(ErrorCode::kBadRequest), message, "", request_id);
  return r;
}

HttpResponse fallback_error_reply() {
  HttpResponse r;
  r.status = 500;
  r.body = kFallbackBody;
  return r;
}

}  // namespace tensord
