// Who is calling: Bearer token -> tenant (API.md section 9). Only the
// token's SHA-256 is compared, in constant time, against every tenant.
#pragma once

#include <string_view>

#include "api/http_types.h"

namespace tensord {

struct Tenant;
class TenantRegistry;

// The anonymous tenant when the server runs without --config; otherwise the
// tenant whose token matches `Authorization: Bearer <token>`. Throws
// Error(kUnauthenticated) when the header is missing, malformed or unknown.
// Records the tenant's name in req.caller (the request's log line).
Tenant& authenticate(const HttpRequest& req, const TenantRegistry& reg);

// The tenant an Authorization header's value names (the anonymous tenant
// without --config), or nullptr; throws nothing and records nothing.
Tenant* tenant_of(std::string_view authorization, const TenantRegistry& reg);

// Throws Error(kForbidden) unless `t` is an admin.
void require_admin(const Tenant& t);

}  // namespace tensord
