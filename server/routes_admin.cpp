// GET /v1/admin/tenants: live usage per tenant, for admins only. Never
// returns token hashes.
#include "api/admin_json.h"
#include "scheduler/tenant_registry.h"
#include "server/app.h"
#include "server/auth.h"

namespace tensord {

void add_admin_routes(Router& r, AppContext& app) {
  r.add("GET", "/v1/admin/tenants", [&app](HttpRequest& req) {
    require_admin(request_tenant(req));
    std::vector<TenantUsage> usage;
    for (const Tenant* t : app.tenants->all()) {
      const TenantSpec tc = t->config();  // one consistent snapshot (a reload may change it)
      TenantUsage u;
      u.name = t->name;
      u.partition = t->partition;
      u.weight = tc.weight;
      u.admin = tc.admin;
      u.memory_bytes = t->account->used();
      u.memory_limit_bytes = t->account->limit();
      u.stored_tensors = t->store.list("").size();
      u.max_queued = tc.max_queued;
      u.max_running = tc.max_running;
      usage.push_back(std::move(u));
    }
    return json_response(200, tenants_to_json(usage));
  });
}

}  // namespace tensord
