// GET /v1/openapi.json (API.md 1): the embedded spec, answered on the io
// thread (a copy of ~60 KB; no tenant, engine or JSON work involved).
#include "server/routes_openapi.h"

#include <string>

#include "server/app.h"

namespace tensord {

void add_openapi_routes(Router& r) {
  r.add(
      "GET", "/v1/openapi.json", [](HttpRequest&) { return json_response(200, std::string(openapi_json())); },
      Access::kPublic);
}

}  // namespace tensord
