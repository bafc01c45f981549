// POST /v1/run: a program, run now, answered when it ends (API.md 4.1).
// JSON body, or a safetensors body whose __metadata__["request"] holds the
// JSON request and whose tensors are the inputs.
#include "api/json_tensor.h"
#include "api/program_json.h"
#include "api/safetensors.h"
#include "ops/error.h"
#include "scheduler/engine.h"
#include "scheduler/tenant.h"
#include "server/auth.h"
#include "server/app.h"

namespace tensord {

void add_run_routes(Router& r, AppContext& app) {
  add_offloaded(r, "POST", "/v1/run", [&app](HttpRequest& req) {
    Tenant& tenant = authenticate(req, *app.tenants);
    JobSpec spec;
    if (is_safetensors_body(req)) {
      auto body = std::make_shared<const std::string>(std::move(req.body));
      SafetensorsFile f = parse_safetensors(body);
      auto it = f.metadata.find("request");
      if (it == f.metadata.end())
        throw Error(ErrorCode::kBadRequest, "safetensors request without __metadata__[\"request\"]");
      rapidjson::Document d = parse_json_object(it->second, "__metadata__.request");
      std::map<std::string, Tensor> inputs;
      for (auto& [name, t] : f.tensors) inputs.emplace(name, std::move(t));
      spec = job_spec_from_json(d, std::move(inputs));
    } else {
      rapidjson::Document d = parse_json_object(req.body, "body");
      spec = job_spec_from_json(d, {});
    }
    JobResult res = app.engine->run(tenant, std::move(spec));
    HttpResponse resp;
    if (wants_safetensors(req)) {
      resp.content_type = "application/vnd.safetensors";
      resp.body = encode_safetensors(res.outputs, {{"response", job_result_to_json(res, false, false)}});
    } else {
      auto enc = req.query.find("encoding");
      resp.body = job_result_to_json(res, true, enc != req.query.end() && enc->second == "b64");
    }
    return resp;
  });
}

}  // namespace tensord
