#include "api/config_json.h"

#include <fstream>
#include <sstream>

#include "api/json_parse.h"
#include "ops/error.h"

namespace tensord {

namespace {
[[noreturn]] void bad(const std::string& msg) {
  throw Error(ErrorCode::kBadRequest, "config: " + msg);
}

std::string key_of(const rapidjson::Value::ConstMemberIterator& it) {
  return std::string(it->name.GetString(), it->name.GetStringLength());
}

std::string get_string(const rapidjson::Value& v, const std::string& where) {
  if (!v.IsString()) bad(where + " must be a string");
  return std::string(v.GetString(), v.GetStringLength());
}

double get_number(const rapidjson::Value& v, const std::string& where) {
  if (!v.IsNumber()) bad(where + " must be a number");
  return v.GetDouble();
}

int64_t get_int(const rapidjson::Value& v, const std::string& where) {
  if (!v.IsInt64()) bad(where + " must be an integer");
  return v.GetInt64();
}

int get_small_int(const rapidjson::Value& v, const std::string& where) {
  int64_t x = get_int(v, where);
  if (x < INT32_MIN || x > INT32_MAX) bad(where + " is out of range");
  return static_cast<int>(x);
}

PartitionSpec partition_from(const rapidjson::Value& v, size_t i) {
  std::string where = "partitions[" + std::to_string(i) + "]";
  if (!v.IsObject()) bad(where + " must be an object");
  PartitionSpec p;
  bool has_name = false;
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    std::string k = key_of(it);
    if (k == "name") {
      p.name = get_string(it->value, where + ".name");
      has_name = true;
    } else if (k == "share") {
      p.share = get_number(it->value, where + ".share");
    } else if (k == "workqueue_limit") {
      p.workqueue_limit = get_small_int(it->value, where + ".workqueue_limit");
    } else {
      bad(where + ": unknown key \"" + k + "\"");
    }
  }
  if (!has_name) bad(where + ": missing \"name\"");
  return p;
}

TenantSpec tenant_from(const rapidjson::Value& v, size_t i) {
  std::string where = "tenants[" + std::to_string(i) + "]";
  if (!v.IsObject()) bad(where + " must be an object");
  TenantSpec t;
  bool has_name = false, has_token = false, has_partition = false;
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    std::string k = key_of(it);
    const auto& x = it->value;
    if (k == "name") {
      t.name = get_string(x, where + ".name");
      has_name = true;
    } else if (k == "token_sha256") {
      t.token_sha256 = get_string(x, where + ".token_sha256");
      has_token = true;
    } else if (k == "partition") {
      t.partition = get_string(x, where + ".partition");
      has_partition = true;
    } else if (k == "weight") {
      t.weight = get_number(x, where + ".weight");
    } else if (k == "memory_bytes") {
      t.memory_bytes = get_int(x, where + ".memory_bytes");
    } else if (k == "max_queued") {
      t.max_queued = get_small_int(x, where + ".max_queued");
    } else if (k == "max_running") {
      t.max_running = get_small_int(x, where + ".max_running");
    } else if (k == "admin") {
      if (!x.IsBool()) bad(where + ".admin must be true or false");
      t.admin = x.GetBool();
    } else {
      bad(where + ": unknown key \"" + k + "\"");
    }
  }
  if (!has_name) bad(where + ": missing \"name\"");
  if (!has_token) bad(where + ": missing \"token_sha256\"");
  if (!has_partition) bad(where + ": missing \"partition\"");
  return t;
}
}  // namespace

ServerConfig config_from_json(std::string_view text) {
  rapidjson::Document d;
  parse_json(text, d, "config");
  if (!d.IsObject()) bad("expected a JSON object");
  ServerConfig c;
  for (auto it = d.MemberBegin(); it != d.MemberEnd(); ++it) {
    std::string k = key_of(it);
    if (k == "partitions") {
      if (!it->value.IsArray()) bad("\"partitions\" must be a list");
      size_t i = 0;
      for (const auto& p : it->value.GetArray()) c.partitions.push_back(partition_from(p, i++));
    } else if (k == "tenants") {
      if (!it->value.IsArray()) bad("\"tenants\" must be a list");
      size_t i = 0;
      for (const auto& t : it->value.GetArray()) c.tenants.push_back(tenant_from(t, i++));
    } else {
      bad("unknown key \"" + k + "\"");
    }
  }
  validate_config(c);
  return c;
}

ServerConfig load_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kBadRequest, "config: cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return config_from_json(ss.str());
}

}  // namespace tensord
