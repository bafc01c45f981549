// Triton's system shared memory extension (API.md 11.1), over the caller's
// regions (server/shm_registry.h):
//   GET  /v2/systemsharedmemory/status                  [{name, key, offset, byte_size}]
//   GET  /v2/systemsharedmemory/region/{region}/status  the one region (404 when unknown)
//   POST /v2/systemsharedmemory/region/{region}/register   {key, offset?, byte_size}
//   POST /v2/systemsharedmemory/region/{region}/unregister
//   POST /v2/systemsharedmemory/unregister              all of the caller's
// Infer inputs and outputs name regions through their parameters
// (routes_kserve.cpp).
#include "api/kserve_extensions_json.h"
#include "scheduler/tenant.h"
#include "server/auth.h"
#include "server/graph_routes.h"
#include "server/shm_registry.h"

namespace tensord {

namespace {

std::string status_json(const std::vector<ShmRegionStatus>& v) {
  std::vector<KServeShmRegion> out;
  out.reserve(v.size());
  for (const auto& s : v) out.push_back({s.name, s.key, s.offset, s.byte_size});
  return kserve_shm_status_json(out);
}

}  // namespace

void add_shm_routes(Router& r, AppContext& app) {
  r.add("GET", "/v2/systemsharedmemory/status", [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    return json_response(200, status_json(app.shm->status(tenant.name, std::nullopt)));
  });
  r.add("GET", "/v2/systemsharedmemory/region/{region}/status", [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    return json_response(200, status_json(app.shm->status(tenant.name, req.params.at("region"))));
  });
  r.add("POST", "/v2/systemsharedmemory/region/{region}/register", [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    KServeShmRegion reg = kserve_shm_register_from_json(req.body);
    app.shm->add(tenant.name, req.params.at("region"), reg.key, reg.offset, reg.byte_size);
    return json_response(200, "{}");
  });
  r.add("POST", "/v2/systemsharedmemory/region/{region}/unregister", [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    app.shm->remove(tenant.name, req.params.at("region"));
    return json_response(200, "{}");
  });
  r.add("POST", "/v2/systemsharedmemory/unregister", [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    app.shm->remove_all(tenant.name);
    return json_response(200, "{}");
  });
}

}  // namespace tensord
