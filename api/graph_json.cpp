#include "api/graph_json.h"

#include "api/json_document.h"

#include "api/json_tensor.h"
#include "api/program_json.h"
#include "api/sha256.h"
#include "ops/error.h"

namespace tensord {
namespace {

[[noreturn]] void bad(const std::string& msg) {
  throw Error(ErrorCode::kBadRequest, msg);
}

TensorMeta spec_from_json(const rapidjson::Value& v, const std::string& where) {
  if (!v.IsObject()) bad(where + ": expected {\"dtype\", \"shape\"}");
  auto dt = v.FindMember("dtype");
  if (dt == v.MemberEnd() || !dt->value.IsString()) bad(where + ": \"dtype\" must be a dtype name");
  auto t = dtype_from_name(std::string(dt->value.GetString(), dt->value.GetStringLength()));
  if (!t) bad(where + ": unknown dtype '" + std::string(dt->value.GetString(), dt->value.GetStringLength()) + "'");
  auto sh = v.FindMember("shape");
  if (sh == v.MemberEnd() || !sh->value.IsArray()) bad(where + ": \"shape\" must be a list of ints");
  TensorMeta m;
  m.dtype = *t;
  for (const auto& d : sh->value.GetArray()) {
    if (!d.IsInt64() || d.GetInt64() < 0) bad(where + ": \"shape\" must be a list of non-negative ints");
    m.shape.push_back(d.GetInt64());
  }
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    std::string k(it->name.GetString(), it->name.GetStringLength());
    if (k != "dtype" && k != "shape") bad(where + ": unknown field '" + k + "'");
  }
  try {
    shape_numel(m.shape);
  } catch (const Error& e) {
    bad(where + ": " + e.message());
  }
  return m;
}

// {"per_rank": [{dtype, shape}, ...]}: one per rank of the group.
std::vector<TensorMeta> per_rank_specs_from_json(const rapidjson::Value& v, const std::string& where) {
  if (v.MemberCount() != 1) bad(where + ": a per_rank declaration has no other field");
  const rapidjson::Value& list = v["per_rank"];
  if (!list.IsArray() || list.Empty()) bad(where + ".per_rank must be a non-empty list of {dtype, shape}");
  std::vector<TensorMeta> out;
  for (const auto& e : list.GetArray()) {
    out.push_back(spec_from_json(e, where + ".per_rank[" + std::to_string(out.size()) + "]"));
  }
  return out;
}

std::string graph_name_from_json(const rapidjson::Value& v) {
  if (!v.IsString()) bad("request.name must be a string of [A-Za-z0-9_.-]");
  std::string name(v.GetString(), v.GetStringLength());
  if (name.empty() || name.size() > 128) bad("request.name must be 1 to 128 characters");
  bool only_dots = true;
  for (char c : name) {
    const bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) bad("request.name may hold only A-Z a-z 0-9 _ . - (got '" + name.substr(0, 64) + "')");
    only_dots = only_dots && c == '.';
  }
  if (only_dots) bad("request.name must not be only dots");
  if (name.size() > 2 && name.starts_with("g-") && name.find_first_not_of("0123456789", 2) == std::string::npos) {
    bad("request.name '" + name + "' looks like a graph id; pick another");
  }
  return name;
}

}  // namespace

GraphCaptureRequest graph_capture_from_json(const rapidjson::Value& req) {
  if (!req.IsObject()) bad("request must be a JSON object");
  GraphCaptureRequest r;
  auto prog = req.FindMember("program");
  if (prog == req.MemberEnd()) bad("request: missing \"program\"");
  r.program = program_from_json(prog->value);
  r.program_sha256 = sha256_hex(program_json_text(prog->value));
  bool have_inputs = false;
  for (auto it = req.MemberBegin(); it != req.MemberEnd(); ++it) {
    std::string key(it->name.GetString(), it->name.GetStringLength());
    const auto& v = it->value;
    if (key == "inputs") {
      if (!v.IsObject()) bad("request.inputs must be an object of name -> {dtype, shape}");
      have_inputs = true;
      for (auto in = v.MemberBegin(); in != v.MemberEnd(); ++in) {
        std::string name(in->name.GetString(), in->name.GetStringLength());
        if (in->value.IsObject() && in->value.HasMember("per_rank")) {
          r.per_rank[name] = per_rank_specs_from_json(in->value, "inputs." + name);
        } else {
          r.inputs[name] = spec_from_json(in->value, "inputs." + name);
        }
      }
    } else if (key == "pool") {
      if (v.IsNull()) continue;
      if (!v.IsString()) bad("request.pool must be a graph id");
      r.pool.assign(v.GetString(), v.GetStringLength());
    } else if (key == "name") {
      if (v.IsNull()) continue;
      r.name = graph_name_from_json(v);
    } else if (key == "ranks") {
      JobSpec ranks;  // the same "ranks" as /v1/run's
      apply_request_field(ranks, key, v);
      r.spmd = std::move(ranks.spmd);
    } else if (key != "program") {
      unknown_request_field(key);
    }
  }
  if (!r.per_rank.empty() && !r.spmd) {
    bad("inputs." + r.per_rank.begin()->first + ": a per_rank declaration needs \"ranks\" (API.md 8)");
  }
  if (r.spmd && !r.pool.empty()) bad("request.pool: a graph captured with ranks has pools of its own");
  if (!have_inputs) {
    for (const auto& in : r.program.inputs) {
      if (in.any_shape) bad("program.inputs." + in.name + ": a graph's inputs need their shapes");
      r.inputs[in.name] = in.meta;
    }
  }
  return r;
}

JobSpec graph_replay_from_json(const rapidjson::Value& req, std::map<std::string, Tensor> file_inputs) {
  if (!req.IsObject()) bad("request must be a JSON object");
  JobSpec s;
  s.inputs = std::move(file_inputs);
  for (auto it = req.MemberBegin(); it != req.MemberEnd(); ++it) {
    std::string key(it->name.GetString(), it->name.GetStringLength());
    if (key == "program") bad("request: a replay takes no \"program\" (it was captured)");
    if (!apply_request_field(s, key, it->value)) unknown_request_field(key);
  }
  return s;
}

std::string graph_info_to_json(const GraphInfo& info) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("id");
  w.String(info.id.c_str(), static_cast<rapidjson::SizeType>(info.id.size()));
  w.Key("name");
  if (info.name.empty()) {
    w.Null();
  } else {
    w.String(info.name.c_str(), static_cast<rapidjson::SizeType>(info.name.size()));
  }
  w.Key("nodes");
  w.Int64(info.nodes);
  w.Key("bytes");
  w.Int64(info.bytes);
  w.Key("replays");
  w.Int64(info.replays);
  w.Key("is_capturing");
  w.Bool(info.is_capturing);
  w.Key("pool");
  w.String(info.pool.c_str(), static_cast<rapidjson::SizeType>(info.pool.size()));
  if (!info.ranks.empty()) {
    w.Key("ranks");
    w.StartArray();
    for (int r : info.ranks) w.Int(r);
    w.EndArray();
    w.Key("group");
    w.String(info.group.c_str(), static_cast<rapidjson::SizeType>(info.group.size()));
  }
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

GraphCaptureRequest graph_capture_from_body(std::string_view body) {
  rapidjson::Document d = parse_json_object(body, "body");
  return graph_capture_from_json(d);
}

JobSpec graph_replay_from_json_body(std::string& body) {
  BodyDocument bd;
  parse_json_object_insitu(body, bd.doc(), "body");
  return graph_replay_from_json(bd.doc(), {});
}

JobSpec graph_replay_from_json_text(std::optional<std::string_view> request, const char* what,
                                    std::map<std::string, Tensor> file_inputs) {
  if (!request) {
    rapidjson::Document empty;
    empty.SetObject();
    return graph_replay_from_json(empty, std::move(file_inputs));
  }
  rapidjson::Document d = parse_json_object(*request, what);
  return graph_replay_from_json(d, std::move(file_inputs));
}

}  // namespace tensord
