#include "server/error_policy.h"

#include <exception>

#include "metrics/log.h"
#include "ops/error.h"

namespace tensord {
namespace {

HttpResponse internal_error(const char* what, const std::string& request_id, const std::string& method,
                            const std::string& route, ErrorStyle style) {
  log::error("internal error", {{"request_id", request_id},
                                {"method", method},
                                {"route", route.empty() ? std::string("unmatched") : route},
                                {"error", what}});
  return safe_error_reply(Error(ErrorCode::kInternal, "internal error"), request_id, style);
}

}  // namespace

HttpResponse safe_error_reply(const Error& e, const std::string& request_id, ErrorStyle style) {
  try {
    return error_reply(e, request_id, 0, style);
  } catch (...) {
    return fallback_error_reply();
  }
}

HttpResponse guarded(const std::function<HttpResponse()>& f, const std::string& request_id, const std::string& method,
                     const std::string& route, ErrorStyle style) {
  try {
    return f();
  } catch (const Error& e) {
    return safe_error_reply(e, request_id, style);
  } catch (const std::exception& e) {
    return internal_error(e.what(), request_id, method, route, style);
  } catch (...) {
    return internal_error("unknown exception", request_id, method, route, style);
  }
}

}  // namespace tensord
