#include "api/stored_json.h"

#include "api/json_writer.h"
#include "ops/mx_tensor.h"

namespace tensord {
namespace {

void write_info(JsonWriter& w, const StoredInfo& i) {
  w.StartObject();
  w.Key("name");
  write_string(w, i.name);
  const MxMeta* mx = i.meta.mx.get();
  w.Key("dtype");  // an MX tensor's format (API.md 3.1 lists them as dtypes)
  write_string(w, mx ? mx_format_name(mx->format) : dtype_name(i.meta.dtype));
  w.Key("shape");  // logical
  w.StartArray();
  for (int64_t d : i.meta.shape) w.Int64(d);
  w.EndArray();
  w.Key("bytes");  // an MX tensor's packed bytes: elements and scales
  w.Int64(i.bytes);
  if (mx) {
    w.Key("block_size");
    w.Int64(mx->block_size);
    w.Key("axis");
    w.Int64(mx->axis);
  }
  w.EndObject();
}

std::string list_to_json(const char* key, const std::vector<StoredInfo>& list) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key(key);
  w.StartArray();
  for (const auto& i : list) write_info(w, i);
  w.EndArray();
  w.EndObject();
  return json_text(sb);
}

}  // namespace

std::string stored_info_to_json(const StoredInfo& info) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  write_info(w, info);
  return json_text(sb);
}

std::string stored_list_to_json(const std::vector<StoredInfo>& list) {
  return list_to_json("tensors", list);
}

std::string upload_result_to_json(const std::vector<StoredInfo>& stored) {
  return list_to_json("stored", stored);
}

std::string checkpoint_info_to_json(const CheckpointInfo& info) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("path");
  write_string(w, info.path);
  w.Key("tensors");
  w.Int64(info.tensors);
  w.Key("bytes");
  w.Int64(info.bytes);
  w.EndObject();
  return json_text(sb);
}

}  // namespace tensord
