#include "api/kserve_extensions_json.h"

#include "api/program_json.h"
#include "api/json_writer.h"
#include "ops/error.h"

namespace tensord {
namespace {

void write_dims(JsonWriter& w, const TensorMeta& meta) {
  w.Key("dims");
  w.StartArray();
  for (int64_t d : meta.shape) w.Int64(d);
  w.EndArray();
}

// TYPE_FP32 and so on: Triton's config names are TYPE_ + the KServe
// datatype; a dtype KServe lacks is TYPE_INVALID (such a model refuses
// inference: check_kserve_dtypes).
std::string config_type(DType t) {
  auto k = kserve_datatype(t);
  return k ? "TYPE_" + std::string(*k) : std::string("TYPE_INVALID");
}

void write_io(JsonWriter& w, const char* key, const std::vector<KServeTensorInfo>& v, bool input) {
  w.Key(key);
  w.StartArray();
  for (const auto& t : v) {
    w.StartObject();
    w.Key("name");
    write_string(w, t.name);
    w.Key("data_type");
    write_string(w, config_type(t.meta.dtype));
    if (input) {
      w.Key("format");
      w.String("FORMAT_NONE");
    }
    write_dims(w, t.meta);
    w.Key("is_shape_tensor");
    w.Bool(false);
    if (input) {
      w.Key("allow_ragged_batch");
      w.Bool(false);
      w.Key("optional");
      w.Bool(false);
    } else {
      w.Key("label_filename");
      w.String("");
    }
    w.EndObject();
  }
  w.EndArray();
}

void write_duration(JsonWriter& w, const char* key, const KServeDurationStat& d) {
  w.Key(key);
  w.StartObject();
  w.Key("count");
  w.Uint64(d.count);
  w.Key("ns");
  w.Uint64(d.ns);
  w.EndObject();
}

}  // namespace

std::string kserve_model_config_json(const KServeModel& m, const std::string& partition, bool gpu) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("name");
  write_string(w, m.name);
  w.Key("platform");
  w.String("tensord");
  w.Key("backend");
  w.String("tensord");
  w.Key("version_policy");
  w.StartObject();
  w.Key("latest");
  w.StartObject();
  w.Key("num_versions");
  w.Int(1);
  w.EndObject();
  w.EndObject();
  w.Key("max_batch_size");
  w.Int(0);
  write_io(w, "input", m.inputs, true);
  write_io(w, "output", m.outputs, false);
  w.Key("batch_input");
  w.StartArray();
  w.EndArray();
  w.Key("batch_output");
  w.StartArray();
  w.EndArray();
  w.Key("instance_group");
  w.StartArray();
  w.StartObject();
  w.Key("name");
  write_string(w, partition);
  w.Key("kind");
  w.String(gpu ? "KIND_GPU" : "KIND_CPU");
  w.Key("count");
  w.Int(1);
  w.Key("gpus");
  w.StartArray();
  if (gpu) w.Int(0);
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.Key("default_model_filename");
  w.String("");
  w.Key("parameters");
  w.StartObject();
  w.EndObject();
  w.Key("model_warmup");
  w.StartArray();
  w.EndArray();
  w.Key("model_transaction_policy");
  w.StartObject();
  w.Key("decoupled");
  w.Bool(false);
  w.EndObject();
  w.EndObject();
  return json_text(sb);
}

std::string kserve_model_stats_json(const std::vector<KServeModelStats>& models) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("model_stats");
  w.StartArray();
  for (const auto& m : models) {
    w.StartObject();
    w.Key("name");
    write_string(w, m.name);
    w.Key("version");
    w.String("1");
    w.Key("last_inference");
    w.Int64(m.last_inference_ms);
    w.Key("inference_count");
    w.Uint64(m.inference_count);
    w.Key("execution_count");
    w.Uint64(m.execution_count);
    w.Key("inference_stats");
    w.StartObject();
    write_duration(w, "success", m.success);
    write_duration(w, "fail", m.fail);
    write_duration(w, "queue", m.queue);
    write_duration(w, "compute_input", m.compute_input);
    write_duration(w, "compute_infer", m.compute_infer);
    write_duration(w, "compute_output", m.compute_output);
    write_duration(w, "cache_hit", {});
    write_duration(w, "cache_miss", {});
    w.EndObject();
    w.Key("response_stats");
    w.StartObject();
    w.EndObject();
    w.Key("batch_stats");
    w.StartArray();
    w.EndArray();
    w.Key("memory_usage");
    w.StartArray();
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return json_text(sb);
}

std::string kserve_repository_index_json(const std::vector<std::string>& names) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartArray();
  for (const auto& n : names) {
    w.StartObject();
    w.Key("name");
    write_string(w, n);
    w.Key("version");
    w.String("1");
    w.Key("state");
    w.String("READY");
    w.Key("reason");
    w.String("");
    w.EndObject();
  }
  w.EndArray();
  return json_text(sb);
}

bool kserve_repository_index_ready_only(const std::string& body) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return false;
  rapidjson::Document d = parse_json_object(body, "body");
  auto it = d.FindMember("ready");
  if (it == d.MemberEnd()) return false;
  if (!it->value.IsBool()) throw Error(ErrorCode::kBadRequest, "\"ready\" must be a boolean");
  return it->value.GetBool();
}

KServeShmRegion kserve_shm_register_from_json(const std::string& body) {
  rapidjson::Document d = parse_json_object(body, "body");
  KServeShmRegion r;
  bool key = false, size = false;
  for (const auto& m : d.GetObject()) {
    const std::string_view k(m.name.GetString(), m.name.GetStringLength());
    if (k == "key") {
      if (!m.value.IsString()) throw Error(ErrorCode::kBadRequest, "\"key\" must be a string");
      r.key.assign(m.value.GetString(), m.value.GetStringLength());
      key = true;
    } else if (k == "offset" || k == "byte_size") {
      if (!m.value.IsUint64()) {
        throw Error(ErrorCode::kBadRequest, "\"" + std::string(k) + "\" must be a non-negative integer");
      }
      (k == "offset" ? r.offset : r.byte_size) = m.value.GetUint64();
      size |= k == "byte_size";
    } else {
      throw Error(ErrorCode::kBadRequest,
                  "unknown field '" + std::string(k.substr(0, 64)) + "' (a registration has key, offset, byte_size)");
    }
  }
  if (!key) throw Error(ErrorCode::kBadRequest, "missing \"key\" (the shared memory object's name)");
  if (!size) throw Error(ErrorCode::kBadRequest, "missing \"byte_size\"");
  return r;
}

std::string kserve_shm_status_json(const std::vector<KServeShmRegion>& regions) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartArray();
  for (const auto& r : regions) {
    w.StartObject();
    w.Key("name");
    write_string(w, r.name);
    w.Key("key");
    write_string(w, r.key);
    w.Key("offset");
    w.Uint64(r.offset);
    w.Key("byte_size");
    w.Uint64(r.byte_size);
    w.EndObject();
  }
  w.EndArray();
  return json_text(sb);
}

}  // namespace tensord
