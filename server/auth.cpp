#include "server/auth.h"

#include "api/sha256.h"
#include "ops/error.h"
#include "scheduler/tenant.h"
#include "scheduler/tenant_registry.h"

namespace tensord {

namespace {
// The tenant `h` (an Authorization header's value) names; nullptr with
// *why set when it names none.
Tenant* identify(std::string_view h, const TenantRegistry& reg, const char** why) {
  if (reg.anonymous()) return reg.default_tenant();
  if (h.empty()) return *why = "missing Authorization: Bearer <token>", nullptr;
  constexpr std::string_view kScheme = "bearer ";
  if (h.size() <= kScheme.size() || h.size() > 4096) return *why = "malformed Authorization header", nullptr;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(h[i])) != kScheme[i]) {
      return *why = "Authorization must use the Bearer scheme", nullptr;
    }
  }
  size_t start = h.find_first_not_of(' ', kScheme.size());
  if (start == std::string::npos) return *why = "empty bearer token", nullptr;
  Tenant* t = reg.by_token_hash(sha256_hex(h.substr(start)));
  if (!t) *why = "unknown token";
  return t;
}
}  // namespace

Tenant& authenticate(const HttpRequest& req, const TenantRegistry& reg) {
  Tenant* t = nullptr;
  const char* why = "";
  if (req.who) {
    t = req.who->tenant;
    why = req.who->why.c_str();
  } else {
    t = identify(req.header("authorization"), reg, &why);
  }
  if (!t) throw Error(ErrorCode::kUnauthenticated, why);
  if (req.caller) *req.caller = t->name;
  return *t;
}

void authenticate_request(HttpRequest& req, const TenantRegistry& reg) {
  if (!req.who) req.who = std::make_shared<const Caller>(resolve_caller(req.header("authorization"), reg));
  authenticate(req, reg);
}

Tenant& request_tenant(const HttpRequest& req) {
  if (!req.who || !req.who->tenant) {
    throw Error(ErrorCode::kInternal, "route " + req.route + " was called without authentication");
  }
  return *req.who->tenant;
}

Caller resolve_caller(std::string_view authorization, const TenantRegistry& reg) {
  Caller c;
  const char* why = "";
  c.tenant = identify(authorization, reg, &why);
  if (!c.tenant) {
    c.why = why;
    return c;
  }
  c.lane = c.tenant->partition;
  c.account = c.tenant->account;
  return c;
}

void require_admin(const Tenant& t) {
  if (!t.admin()) throw Error(ErrorCode::kForbidden, "tenant '" + t.name + "' is not an admin");
}

}  // namespace tensord
