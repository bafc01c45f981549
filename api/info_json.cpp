#include "api/info_json.h"

#include "api/json_writer.h"

namespace tensord {

std::string server_info_to_json(const ServerInfo& info) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("name");
  w.String("tensord");
  w.Key("version");
  write_string(w, info.version);
  w.Key("api");
  w.String("v1");
  w.Key("backend");
  write_string(w, info.backend);
  w.Key("compiled_backends");
  w.StartArray();
  for (const auto& b : info.compiled_backends) write_string(w, b);
  w.EndArray();
  w.Key("libraries");
  w.StartObject();
  for (const auto& [k, v] : info.libraries) {
    write_key(w, k);
    write_string(w, v);
  }
  w.EndObject();
  w.Key("devices");
  w.StartArray();
  for (const auto& d : info.devices) {
    w.StartObject();
    w.Key("device");
    write_string(w, d.device.str());
    w.Key("name");
    write_string(w, d.name);
    w.Key("total_memory");
    w.Int64(d.total_memory);
    w.Key("compute_units");
    w.Int(d.compute_units);
    w.EndObject();
  }
  w.EndArray();
  w.Key("ranks");
  w.StartObject();
  w.Key("local");
  w.Int(info.ranks_local);
  w.Key("world");
  w.Int(info.ranks_world);
  w.Key("offset");
  w.Int(info.rank_offset);
  w.EndObject();
  w.Key("partitions");
  w.StartArray();
  for (const auto& p : info.partitions) {
    w.StartObject();
    w.Key("name");
    write_string(w, p.name);
    w.Key("share");
    w.Double(p.share);
    w.Key("workqueue_limit");
    w.Int(p.workqueue_limit);
    if (p.stats) {
      w.Key("inflight");
      w.Int(p.stats->inflight);
      w.Key("queued");
      w.Int64(p.stats->queued);
      w.Key("threads");
      w.Int(p.stats->threads);
      w.Key("cpus");
      w.StartArray();
      for (int c : p.stats->cpus) w.Int(c);
      w.EndArray();
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("max_body_bytes");
  w.Uint64(info.max_body_bytes);
  w.Key("uptime_s");
  w.Double(info.uptime_s);
  w.EndObject();
  return json_text(sb);
}

std::string health_to_json(std::string_view status) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("status");
  write_string(w, status);
  w.EndObject();
  return json_text(sb);
}

}  // namespace tensord
