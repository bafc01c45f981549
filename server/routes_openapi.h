// GET /v1/openapi.json: the OpenAPI 3.1 description of every REST route
// (api/openapi.yaml, embedded as JSON at build time by
// scripts/openapi_to_cpp.py; see docs/api-notes.md "OpenAPI").
#pragma once

#include <string_view>

#include "server/router.h"

namespace tensord {

// The spec as compact JSON (the generated openapi_spec.cpp).
std::string_view openapi_json();

// Served without a token: the document holds no tenant data, and tools
// (schemathesis, code generators, Swagger UI) fetch it before they have one.
void add_openapi_routes(Router& r);

}  // namespace tensord
