// Stored tensors (API.md 3.3): PUT/GET/HEAD/DELETE /v1/tensors/{name},
// GET /v1/tensors?prefix=, POST /v1/tensors:upload, POST /v1/checkpoint.
#include "api/checkpoint.h"
#include "api/json_tensor.h"
#include "api/safetensors.h"
#include "api/stored_json.h"
#include "ops/error.h"
#include "ops/mx_tensor.h"
#include "scheduler/tenant.h"
#include "server/app.h"
#include "server/auth.h"
#include "server/checkpointer.h"

namespace tensord {

namespace {

std::string shape_header(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out;
}

Tensor tensor_from_body(HttpRequest& req) {
  if (is_safetensors_body(req)) {
    auto body = req.share_body();
    SafetensorsFile f = parse_safetensors(body);
    if (f.tensors.size() != 1) {
      throw Error(ErrorCode::kBadRequest, "PUT takes a safetensors file with exactly one tensor, got " +
                                              std::to_string(f.tensors.size()) + " (use POST /v1/tensors:upload)");
    }
    return f.tensors[0].second;
  }
  return tensor_from_json_request(req, "body");
}

}  // namespace

void add_tensor_routes(Router& r, AppContext& app) {
  add_offloaded(
      r, "PUT", "/v1/tensors/{name...}",
      [](HttpRequest& req) {
        // The body's charge (HttpRequest::body_charge) ends with the
        // handler, before its answer, whatever it throws.
        std::shared_ptr<void> body_charge = std::move(req.body_charge);
        Tenant& tenant = request_tenant(req);
        const std::string name = req.params.at("name");
        validate_tensor_name(name);
        Tensor t = tensor_from_body(req);
        body_charge.reset();  // the stored tensor is charged instead
        bool created = tenant.store.put(name, t);
        HttpResponse resp =
            json_response(created ? 201 : 200, stored_info_to_json({name, t.meta(), static_cast<int64_t>(t.nbytes())}));
        if (created) resp.headers.emplace_back("Location", "/v1/tensors/" + name);
        return resp;
      },
      BodyKind::kTensorUpload);

  auto fetch = [](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    const std::string name = req.params.at("name");
    validate_tensor_name(name);
    auto t = tenant.store.get(name);
    if (!t) throw Error(ErrorCode::kNotFound, "tensor '" + name + "' not found");
    return *t;
  };

  add_offloaded(r, "GET", "/v1/tensors/{name...}", [fetch](HttpRequest& req) {
    Tensor stored = fetch(req);
    const bool b64 = b64_requested(req);  // checked whatever the Accept, as the run routes do
    Tensor t = stored.to_host();          // a device-resident tensor is copied out
    if (wants_safetensors(req)) return safetensors_response({{req.params.at("name"), t}}, {});
    HttpResponse resp;
    resp.views = tensor_to_json_body(t, b64);
    return resp;
  });

  r.add("HEAD", "/v1/tensors/{name...}", [fetch](HttpRequest& req) {
    Tensor t = fetch(req);
    HttpResponse resp;
    const MxMeta* mx = t.meta().mx.get();
    resp.headers.emplace_back("X-Tensor-Dtype", std::string(mx ? mx_format_name(mx->format) : dtype_name(t.dtype())));
    resp.headers.emplace_back("X-Tensor-Shape", shape_header(t.shape()));
    resp.headers.emplace_back("X-Tensor-Bytes", std::to_string(t.nbytes()));
    if (mx) {
      resp.headers.emplace_back("X-Tensor-Mx-Block-Size", std::to_string(mx->block_size));
      resp.headers.emplace_back("X-Tensor-Mx-Axis", std::to_string(mx->axis));
    }
    return resp;
  });

  add_offloaded(r, "DELETE", "/v1/tensors/{name...}", [](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    const std::string name = req.params.at("name");
    validate_tensor_name(name);
    if (!tenant.store.erase(name)) throw Error(ErrorCode::kNotFound, "tensor '" + name + "' not found");
    HttpResponse resp;
    resp.status = 204;
    resp.content_type.clear();
    return resp;
  });

  r.add("GET", "/v1/tensors", [](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    std::string prefix;
    if (auto it = req.query.find("prefix"); it != req.query.end()) prefix = it->second;
    if (prefix.size() > 256) throw Error(ErrorCode::kBadRequest, "prefix longer than 256 bytes");
    return json_response(200, stored_list_to_json(tenant.store.list(prefix)));
  });

  add_offloaded(
      r, "POST", "/v1/tensors:upload",
      [](HttpRequest& req) {
        std::shared_ptr<void> body_charge = std::move(req.body_charge);  // as PUT's
        Tenant& tenant = request_tenant(req);
        if (!is_safetensors_body(req)) {
          throw Error(ErrorCode::kBadRequest, "upload takes an application/vnd.safetensors body");
        }
        auto body = req.share_body();
        SafetensorsFile f = parse_safetensors(body);
        for (const auto& [name, t] : f.tensors) validate_tensor_name(name);
        std::vector<StoredInfo> stored;
        for (const auto& [name, t] : f.tensors) stored.push_back({name, t.meta(), static_cast<int64_t>(t.nbytes())});
        body_charge.reset();  // the stored tensors are charged instead
        tenant.store.commit(std::move(f.tensors));
        return json_response(200, upload_result_to_json(stored));
      },
      BodyKind::kCharged);

  add_offloaded(r, "POST", "/v1/checkpoint", [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    return json_response(200, checkpoint_info_to_json(app.checkpointer->write(tenant, "request")));
  });
}

}  // namespace tensord
