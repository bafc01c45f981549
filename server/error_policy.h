// The one error policy of HTTP answers: what a handler throws becomes its
// error reply (tensord::Error as API.md section 2, or 11 for the /v2
// routes; anything else a logged 500). Used by the session and by the
// asynchronous replies. Included by server/*.cpp only.
#pragma once

#include <functional>
#include <string>

#include "api/error_reply.h"
#include "api/http_types.h"

namespace tensord {

class Error;

// f(), or the error reply for what it throws (`style`: the error body's
// shape). Never throws.
HttpResponse guarded(const std::function<HttpResponse()>& f, const std::string& request_id, const std::string& method,
                     const std::string& route, ErrorStyle style = ErrorStyle::kTensord);

// error_reply(e), or a fixed 500 should building it ever throw.
HttpResponse safe_error_reply(const Error& e, const std::string& request_id, ErrorStyle style = ErrorStyle::kTensord);

}  // namespace tensord
