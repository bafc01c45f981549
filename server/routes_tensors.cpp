// Stored tensors (API.md 3.3): PUT/GET/HEAD/DELETE /v1/tensors/{name},
// GET /v1/tensors?prefix=, POST /v1/tensors:upload, POST /v1/checkpoint.
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "api/checkpoint.h"
#include "server/checkpointer.h"
#include "api/json_tensor.h"
#include "api/safetensors.h"
#include "ops/error.h"
#include "scheduler/tenant.h"
#include "server/auth.h"
#include "server/app.h"

namespace tensord {

namespace {
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void write_info(Writer& w, const std::string& name, const TensorMeta& m, int64_t bytes) {
  w.StartObject();
  w.Key("name");
  w.String(name);
  w.Key("dtype");
  w.String(std::string(dtype_name(m.dtype)));
  w.Key("shape");
  w.StartArray();
  for (int64_t d : m.shape) w.Int64(d);
  w.EndArray();
  w.Key("bytes");
  w.Int64(bytes);
  w.EndObject();
}

std::string shape_header(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out;
}

Tensor tensor_from_body(HttpRequest& req) {
  if (is_safetensors_body(req)) {
    auto body = std::make_shared<const std::string>(std::move(req.body));
    SafetensorsFile f = parse_safetensors(body);
    if (f.tensors.size() != 1) {
      throw Error(ErrorCode::kBadRequest, "PUT takes a safetensors file with exactly one tensor, got " +
                                              std::to_string(f.tensors.size()) + " (use POST /v1/tensors:upload)");
    }
    return f.tensors[0].second;
  }
  return tensor_from_json_body(req.body, "body");
}

bool use_b64(const HttpRequest& req) {
  auto it = req.query.find("encoding");
  return it != req.query.end() && it->second == "b64";
}
}  // namespace

void add_tensor_routes(Router& r, AppContext& app) {
  add_offloaded(r, "PUT", "/v1/tensors/{name...}", [&app](HttpRequest& req) {
    Tenant& tenant = authenticate(req, *app.tenants);
    const std::string name = req.params.at("name");
    validate_tensor_name(name);
    Tensor t = tensor_from_body(req);
    bool created = tenant.store.put(name, t);
    rapidjson::StringBuffer sb;
    Writer w(sb);
    write_info(w, name, t.meta(), static_cast<int64_t>(t.nbytes()));
    HttpResponse resp = json_response(created ? 201 : 200, std::string(sb.GetString(), sb.GetSize()));
    if (created) resp.headers.emplace_back("Location", "/v1/tensors/" + name);
    return resp;
  });

  auto fetch = [&app](HttpRequest& req) {
    Tenant& tenant = authenticate(req, *app.tenants);
    const std::string name = req.params.at("name");
    validate_tensor_name(name);
    auto t = tenant.store.get(name);
    if (!t) throw Error(ErrorCode::kNotFound, "tensor '" + name + "' not found");
    return *t;
  };

  add_offloaded(r, "GET", "/v1/tensors/{name...}", [fetch](HttpRequest& req) {
    Tensor t = fetch(req).to_host();  // a device-resident tensor is copied out
    if (wants_safetensors(req)) return safetensors_response({{req.params.at("name"), t}}, {});
    HttpResponse resp;
    resp.body = tensor_to_json_string(t, use_b64(req));
    return resp;
  });

  r.add("HEAD", "/v1/tensors/{name...}", [fetch](HttpRequest& req) {
    Tensor t = fetch(req);
    HttpResponse resp;
    resp.headers.emplace_back("X-Tensor-Dtype", std::string(dtype_name(t.dtype())));
    resp.headers.emplace_back("X-Tensor-Shape", shape_header(t.shape()));
    resp.headers.emplace_back("X-Tensor-Bytes", std::to_string(t.nbytes()));
    return resp;
  });

  add_offloaded(r, "DELETE", "/v1/tensors/{name...}", [&app](HttpRequest& req) {
    Tenant& tenant = authenticate(req, *app.tenants);
    const std::string name = req.params.at("name");
    validate_tensor_name(name);
    if (!tenant.store.erase(name)) throw Error(ErrorCode::kNotFound, "tensor '" + name + "' not found");
    HttpResponse resp;
    resp.status = 204;
    resp.content_type.clear();
    return resp;
  });

  r.add("GET", "/v1/tensors", [&app](HttpRequest& req) {
    Tenant& tenant = authenticate(req, *app.tenants);
    std::string prefix;
    if (auto it = req.query.find("prefix"); it != req.query.end()) prefix = it->second;
    if (prefix.size() > 256) throw Error(ErrorCode::kBadRequest, "prefix longer than 256 bytes");
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    w.Key("tensors");
    w.StartArray();
    for (const auto& i : tenant.store.list(prefix)) write_info(w, i.name, i.meta, i.bytes);
    w.EndArray();
    w.EndObject();
    return json_response(200, std::string(sb.GetString(), sb.GetSize()));
  });

  add_offloaded(r, "POST", "/v1/tensors:upload", [&app](HttpRequest& req) {
    Tenant& tenant = authenticate(req, *app.tenants);
    if (!is_safetensors_body(req)) {
      throw Error(ErrorCode::kBadRequest, "upload takes an application/vnd.safetensors body");
    }
    auto body = std::make_shared<const std::string>(std::move(req.body));
    SafetensorsFile f = parse_safetensors(body);
    for (const auto& [name, t] : f.tensors) validate_tensor_name(name);
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    w.Key("stored");
    w.StartArray();
    for (const auto& [name, t] : f.tensors) write_info(w, name, t.meta(), static_cast<int64_t>(t.nbytes()));
    w.EndArray();
    w.EndObject();
    tenant.store.commit(std::move(f.tensors));
    return json_response(200, std::string(sb.GetString(), sb.GetSize()));
  });

  add_offloaded(r, "POST", "/v1/checkpoint", [&app](HttpRequest& req) {
    Tenant& tenant = authenticate(req, *app.tenants);
    CheckpointInfo ci = app.checkpointer->write(tenant, "request");
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    w.Key("path");
    w.String(ci.path);
    w.Key("tensors");
    w.Int64(ci.tensors);
    w.Key("bytes");
    w.Int64(ci.bytes);
    w.EndObject();
    return json_response(200, std::string(sb.GetString(), sb.GetSize()));
  });
}

}  // namespace tensord
