#include "api/admin_json.h"

#include "api/json_writer.h"

namespace tensord {

std::string tenants_to_json(const std::vector<TenantUsage>& tenants) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("tenants");
  w.StartArray();
  for (const auto& t : tenants) {
    w.StartObject();
    w.Key("name");
    write_string(w, t.name);
    w.Key("partition");
    write_string(w, t.partition);
    w.Key("weight");
    w.Double(t.weight);
    w.Key("admin");
    w.Bool(t.admin);
    w.Key("memory_bytes");
    w.Int64(t.memory_bytes);
    w.Key("memory_limit_bytes");
    w.Int64(t.memory_limit_bytes);
    w.Key("stored_tensors");
    w.Uint64(t.stored_tensors);
    w.Key("max_queued");
    w.Int(t.max_queued);
    w.Key("max_running");
    w.Int(t.max_running);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return json_text(sb);
}

}  // namespace tensord
