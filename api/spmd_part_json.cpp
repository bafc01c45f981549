#include "api/spmd_part_json.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "api/program_json.h"
#include "api/json_tensor.h"

namespace tensord {

std::optional<ErrorCode> error_code_from_name(std::string_view name) {
  for (int c = 0; c <= static_cast<int>(ErrorCode::kUnsupported); ++c) {
    if (error_code_name(static_cast<ErrorCode>(c)) == name) return static_cast<ErrorCode>(c);
  }
  return std::nullopt;
}

std::string spmd_part_to_json(const JobSpec& spec, const std::vector<int>& group, const std::vector<size_t>& members,
                              const std::string& key, int64_t deadline_ms) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("program");
  w.RawValue(spec.program_json.data(), spec.program_json.size(), rapidjson::kObjectType);
  w.Key("inputs");
  w.StartObject();
  for (const auto& [name, t] : spec.inputs) {
    w.Key(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
    tensor_to_json(t.to_host(), w, true);
  }
  if (spec.spmd) {
    for (const auto& [name, in] : spec.spmd->inputs) {
      w.Key(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
      w.StartObject();
      if (in.shard.defined()) {
        w.Key("shard");
        tensor_to_json(in.shard.to_host(), w, true);
        w.Key("dim");
        w.Int64(in.dim);
      } else {
        w.Key("per_rank");
        w.StartArray();
        for (const Tensor& t : in.per_rank) tensor_to_json(t.to_host(), w, true);
        w.EndArray();
      }
      w.EndObject();
    }
  }
  w.EndObject();
  w.Key("ranks");
  w.StartArray();
  for (int r : group) w.Int(r);
  w.EndArray();
  w.Key("spmd_part");
  w.StartObject();
  w.Key("members");
  w.StartArray();
  for (size_t m : members) w.Uint64(m);
  w.EndArray();
  w.Key("key");
  w.String(key);
  w.EndObject();
  if (deadline_ms > 0) {
    w.Key("deadline_ms");
    w.Int64(deadline_ms);
  }
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

std::vector<std::pair<std::string, std::vector<Tensor>>> spmd_part_outputs_from_json(int status, std::string& body) {
  rapidjson::Document d = parse_json_object_insitu(body, "a peer's reply");
  if (status != 200) {
    std::string message = "HTTP " + std::to_string(status), node;
    ErrorCode code = ErrorCode::kUnavailable;
    auto e = d.FindMember("error");
    if (e != d.MemberEnd() && e->value.IsObject()) {
      const auto& ev = e->value;
      if (ev.HasMember("code") && ev["code"].IsString()) {
        if (auto c = error_code_from_name(ev["code"].GetString())) code = *c;
      }
      if (ev.HasMember("message") && ev["message"].IsString()) message = ev["message"].GetString();
      if (ev.HasMember("node") && ev["node"].IsString()) node = ev["node"].GetString();
    }
    throw Error(code, message, node);
  }
  auto outs = d.FindMember("outputs");
  if (outs == d.MemberEnd() || !outs->value.IsObject()) {
    throw Error(ErrorCode::kInternal, "a peer's reply has no outputs object");
  }
  std::vector<std::pair<std::string, std::vector<Tensor>>> out;
  for (auto it = outs->value.MemberBegin(); it != outs->value.MemberEnd(); ++it) {
    std::string name(it->name.GetString(), it->name.GetStringLength());
    std::vector<Tensor> ts;
    auto pr = it->value.IsObject() ? it->value.FindMember("per_rank") : it->value.MemberEnd();
    if (it->value.IsObject() && pr != it->value.MemberEnd() && pr->value.IsArray()) {
      for (const auto& t : pr->value.GetArray()) ts.push_back(tensor_from_json(t, "peer output " + name));
    } else {
      // A replicated tensor: drop our "replicated" field before decoding.
      rapidjson::Value& v = it->value;
      if (v.IsObject()) v.RemoveMember("replicated");
      ts.push_back(tensor_from_json(v, "peer output " + name));
    }
    out.emplace_back(std::move(name), std::move(ts));
  }
  return out;
}

}  // namespace tensord
