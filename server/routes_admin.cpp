// GET /v1/admin/tenants: live usage per tenant, for admins only. Never
// returns token hashes.
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "scheduler/tenant_registry.h"
#include "server/app.h"
#include "server/auth.h"

namespace tensord {

void add_admin_routes(Router& r, AppContext& app) {
  r.add("GET", "/v1/admin/tenants", [&app](HttpRequest& req) {
    require_admin(authenticate(req, *app.tenants));
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    w.StartObject();
    w.Key("tenants");
    w.StartArray();
    for (const Tenant* t : app.tenants->all()) {
      const TenantConfig tc = t->config();  // one consistent snapshot (a reload may change it)
      w.StartObject();
      w.Key("name");
      w.String(t->name.c_str(), static_cast<rapidjson::SizeType>(t->name.size()));
      w.Key("partition");
      w.String(t->partition.c_str(), static_cast<rapidjson::SizeType>(t->partition.size()));
      w.Key("weight");
      w.Double(tc.weight);
      w.Key("admin");
      w.Bool(tc.admin);
      w.Key("memory_bytes");
      w.Int64(t->account->used());
      w.Key("memory_limit_bytes");
      w.Int64(t->account->limit());
      w.Key("stored_tensors");
      w.Uint64(t->store.list("").size());
      w.Key("max_queued");
      w.Int(tc.max_queued);
      w.Key("max_running");
      w.Int(tc.max_running);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    return json_response(200, std::string(sb.GetString(), sb.GetSize()));
  });
}

}  // namespace tensord
