// KServe v2 inference (Open Inference Protocol) over captured graphs (API.md 11):
//   GET  /v2                                  {name, version, extensions}
//   GET  /v2/models/{model}                   {name, versions, platform, inputs, outputs}
//   GET  /v2/models/{model}/ready             200 when it can be replayed
//   POST /v2/models/{model}/infer             inference (JSON, binary tensor data extension)
// and the same under /v2/models/{model}/versions/{version}/ (version "1").
// A model is one of the caller's captured graphs, by name or by id; another
// tenant's is unknown (404). /infer queues the graph's replay exactly as
// /v1/graphs/{id}/replay does (start_graph_replay). Errors answer
// {"error": "<message>"}: the session picks that shape for /v2 paths.
#include <optional>

#include "api/kserve_json.h"
#include "graphs/graph_store.h"
#include "scheduler/graph_service.h"
#include "ops/error.h"
#include "scheduler/engine.h"
#include "scheduler/job_handle.h"
#include "scheduler/tenant.h"
#include "server/auth.h"
#include "server/graph_routes.h"

namespace tensord {

namespace {

std::shared_ptr<CapturedGraph> find_model(const GraphService& graphs, const HttpRequest& req, const Tenant& tenant) {
  const std::string& model = req.params.at("model");
  auto v = req.params.find("version");
  if (v != req.params.end() && v->second != "1") {
    throw Error(ErrorCode::kNotFound,
                "model '" + model + "' has no version '" + v->second.substr(0, 64) + "' (its versions: 1)");
  }
  auto g = graphs.find_model(tenant, model);
  if (!g) throw Error(ErrorCode::kNotFound, "unknown model '" + model.substr(0, 128) + "'");
  return g;
}

KServeModel model_of(const CapturedGraph& g) {
  KServeModel m;
  m.name = g.name.empty() ? g.id : g.name;
  for (const auto& [name, id] : g.program->inputs) {
    m.inputs.push_back({name, g.program->values[static_cast<size_t>(id)].meta});
  }
  for (const auto& [name, id] : g.program->outputs) {
    m.outputs.push_back({name, g.program->values[static_cast<size_t>(id)].meta});
  }
  return m;
}

// Answers an /infer from its replay's end: the requested outputs as KServe
// JSON, with the binary ones' bytes after it (written from the tensors' own
// memory), or the job's error.
void answer_infer(Job& job, const std::shared_ptr<AsyncReply>& reply, std::string model, std::optional<std::string> id,
                  std::vector<KServeOutputRequest> wanted) {
  std::shared_ptr<const JobResult> res;
  std::optional<Error> err;
  try {
    res = std::make_shared<const JobResult>(Engine::result_of(job));
  } catch (const Error& e) {
    err = e;
  }
  size_t bytes = 0;
  if (res) {
    for (const auto& [name, t] : res->outputs) bytes += t.nbytes();
  }
  constexpr size_t kInlineEncodeBytes = 16 << 10;  // as answer_job: more is encoded on the handler pool
  reply->finish(bytes > kInlineEncodeBytes,
                [res, err, model = std::move(model), id = std::move(id), wanted = std::move(wanted)]() {
                  if (err) throw *err;
                  std::vector<std::pair<KServeOutputRequest, Tensor>> outs;
                  for (const auto& w : wanted) {
                    for (const auto& [name, t] : res->outputs) {
                      if (name == w.name) outs.emplace_back(w, t);
                    }
                  }
                  KServeInferResponse kr = kserve_infer_response(model, id, outs);
                  HttpResponse resp;
                  if (!kr.binary.empty()) {
                    resp.content_type = "application/octet-stream";
                    resp.headers.emplace_back("Inference-Header-Content-Length", std::to_string(kr.header.size()));
                    for (const Tensor& t : kr.binary) {
                      if (t.nbytes()) resp.views.push_back(BodyView{t.data(), t.nbytes(), t.storage(), {}});
                    }
                  }
                  resp.body = std::move(kr.header);
                  return resp;
                });
}

void add_model_routes(Router& r, AppContext& app, const std::string& prefix) {
  r.add("GET", prefix, [&app](HttpRequest& req) {
    Tenant& tenant = authenticate(req, *app.tenants);
    return json_response(200, kserve_model_metadata_json(model_of(*find_model(*app.graphs, req, tenant))));
  });

  r.add("GET", prefix + "/ready", [&app](HttpRequest& req) {
    Tenant& tenant = authenticate(req, *app.tenants);
    KServeModel m = model_of(*find_model(*app.graphs, req, tenant));
    check_kserve_dtypes(m);  // a model KServe cannot feed is not ready: 400 naming the dtype
    return json_response(200, kserve_model_ready_json(m.name));
  });

  // As /v1/graphs/{id}/replay: bodies up to 32 KiB are decoded on the io
  // thread, the answer comes from the job's end.
  constexpr size_t kInferInlineBody = 32 << 10;
  r.add_async(
      "POST", prefix + "/infer",
      [&app](HttpRequest& req, const std::shared_ptr<AsyncReply>& reply) {
        Tenant& tenant = authenticate(req, *app.tenants);
        auto g = find_model(*app.graphs, req, tenant);
        if (g->spmd) {
          throw Error(ErrorCode::kBadRequest, "model '" + (g->name.empty() ? g->id : g->name) +
                                                  "' was captured with ranks: KServe inference does not run SPMD "
                                                  "graphs (replay it through /v1/graphs/{id}/replay)");
        }
        const std::string& encoding = req.header("content-encoding");
        if (!encoding.empty() && encoding != "identity") {
          throw Error(ErrorCode::kBadRequest,
                      "Content-Encoding '" + encoding.substr(0, 32) + "' is not supported; send the body uncompressed");
        }
        KServeModel m = model_of(*g);
        KServeInferRequest ir = kserve_infer_from_body(
            req.body, parse_inference_header_length(req.header("inference-header-content-length")), m);
        JobSpec spec;
        spec.inputs = std::move(ir.inputs);
        if (ir.outputs_named) {
          std::vector<std::string> names;
          for (const auto& o : ir.outputs) names.push_back(o.name);
          spec.return_names = std::move(names);
        }
        if (ir.timeout_us > 0) spec.deadline_ms = (ir.timeout_us + 999) / 1000;
        spec.request_id = req.request_id;
        spec.body_charge = std::move(req.body_charge);
        start_graph_replay(app, tenant, g, std::move(spec), reply,
                           [reply, model = m.name, id = std::move(ir.id), wanted = std::move(ir.outputs)](
                               Job& j) mutable { answer_infer(j, reply, std::move(model), std::move(id), wanted); });
      },
      kInferInlineBody, BodyKind::kCharged);
}

}  // namespace

void add_kserve_routes(Router& r, AppContext& app) {
  // Server metadata: behind the token like every route but health (API.md 9).
  r.add("GET", "/v2", [&app](HttpRequest& req) {
    authenticate(req, *app.tenants);
    return json_response(200, kserve_server_metadata_json(app.version));
  });
  add_model_routes(r, app, "/v2/models/{model}");
  add_model_routes(r, app, "/v2/models/{model}/versions/{version}");
}

}  // namespace tensord
