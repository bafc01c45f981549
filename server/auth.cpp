#include "server/auth.h"

#include "api/sha256.h"
#include "ops/error.h"
#include "scheduler/tenant_registry.h"

namespace tensord {

namespace {
Tenant& identify(const HttpRequest& req, const TenantRegistry& reg) {
  if (reg.anonymous()) return *reg.default_tenant();
  const std::string& h = req.header("authorization");
  if (h.empty()) throw Error(ErrorCode::kUnauthenticated, "missing Authorization: Bearer <token>");
  constexpr std::string_view kScheme = "bearer ";
  if (h.size() <= kScheme.size() || h.size() > 4096) {
    throw Error(ErrorCode::kUnauthenticated, "malformed Authorization header");
  }
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(h[i])) != kScheme[i]) {
      throw Error(ErrorCode::kUnauthenticated, "Authorization must use the Bearer scheme");
    }
  }
  size_t start = h.find_first_not_of(' ', kScheme.size());
  if (start == std::string::npos) throw Error(ErrorCode::kUnauthenticated, "empty bearer token");
  Tenant* t = reg.by_token_hash(sha256_hex(std::string_view(h).substr(start)));
  if (!t) throw Error(ErrorCode::kUnauthenticated, "unknown token");
  return *t;
}
}  // namespace

Tenant& authenticate(const HttpRequest& req, const TenantRegistry& reg) {
  Tenant& t = identify(req, reg);
  if (req.caller) *req.caller = t.name;
  return t;
}

void require_admin(const Tenant& t) {
  if (!t.admin()) throw Error(ErrorCode::kForbidden, "tenant '" + t.name + "' is not an admin");
}

}  // namespace tensord
