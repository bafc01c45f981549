// Who is calling: Bearer token -> tenant (API.md section 9). Only the
// token's SHA-256 is compared, in constant time, against every tenant; the
// session does it once per request (resolve_caller, server/caller.h) and
// the routes read what it found.
#pragma once

#include <string_view>

#include "api/http_types.h"
#include "server/caller.h"

namespace tensord {

struct Tenant;
class TenantRegistry;

// The anonymous tenant when the server runs without --config; otherwise the
// tenant whose token matches `Authorization: Bearer <token>`: the one
// req.who names (resolved from the headers), or, for a request the session
// did not resolve, looked up now. Throws Error(kUnauthenticated) when the
// header is missing, malformed or unknown. Records the tenant's name in
// req.caller (the request's log line).
Tenant& authenticate(const HttpRequest& req, const TenantRegistry& reg);

// The router's authenticator (Router::set_authenticator, every kTenant
// route): sets req.who when the session did not (a request made outside
// one), then authenticate().
void authenticate_request(HttpRequest& req, const TenantRegistry& reg);

// The tenant a kTenant route's request was authenticated as (its handler
// runs only after the router's authenticator passed); throws internal
// when called for a request that was not.
Tenant& request_tenant(const HttpRequest& req);

// Who an Authorization header's value names: the tenant (the anonymous
// tenant without --config), its partition as its lane, its account; or no
// tenant and why. Throws nothing and records nothing.
Caller resolve_caller(std::string_view authorization, const TenantRegistry& reg);

// Throws Error(kForbidden) unless `t` is an admin.
void require_admin(const Tenant& t);

}  // namespace tensord
