// Graphs: capture once, replay many (API.md 4.3).
//   POST   /v1/graphs              {program, inputs: {name: {dtype, shape}}, pool?, name?, ranks?}
//                                   -> 201 {id, name, ...}
//          With "ranks" (API.md 8): a member per rank of the group (every one local), each
//          compiled over its own input shapes ({"per_rank": [{dtype, shape}, ...]} where they differ).
//   POST   /v1/graphs/{id}/replay  {inputs, store?, return?} -> as /v1/run (JSON or safetensors)
//   GET    /v1/graphs/{id}         {id, nodes, bytes, replays, is_capturing, pool, ranks?, group?};
//                                   ?format=dot: Graphviz
//   DELETE /v1/graphs/{id}         204; frees the graph and, if no other graph shares it, its pool
// Another tenant's graph is 404, exactly as an unknown one.
// Each route parses, calls the graph service (scheduler/graph_service.h)
// and encodes; a capture is a job on the tenant's partition.
#include <optional>

#include "api/graph_json.h"
#include "api/program_json.h"
#include "api/safetensors.h"
#include "graphs/graph_store.h"
#include "ops/error.h"
#include "scheduler/graph_service.h"
#include "scheduler/job.h"
#include "scheduler/tenant.h"
#include "server/app.h"
#include "server/auth.h"
#include "server/graph_routes.h"

namespace tensord {

namespace {

JobSpec parse_replay_request(HttpRequest& req) {
  if (is_safetensors_body(req)) {
    auto body = req.share_body();
    SafetensorsFile f = parse_safetensors(body);
    std::map<std::string, Tensor> inputs;
    for (auto& [name, t] : f.tensors) inputs.emplace(name, std::move(t));
    auto it = f.metadata.find("request");
    std::optional<std::string_view> request;
    if (it != f.metadata.end()) request = it->second;
    return graph_replay_from_json_text(request, "__metadata__.request", std::move(inputs));
  }
  return graph_replay_from_json_body(req.body);
}

}  // namespace

void start_graph_replay(AppContext& app, Tenant& tenant, const std::shared_ptr<CapturedGraph>& g, JobSpec spec,
                        const std::shared_ptr<AsyncReply>& reply, std::function<void(Job&)> answer) {
  std::shared_ptr<Job> job = app.graphs->replay_async(tenant, g, std::move(spec), std::move(answer));
  cancel_when_client_goes(reply, job);
}

void add_graph_routes(Router& r, AppContext& app) {
  // A capture is a job on the tenant's partition (GraphService): parsed
  // here, answered 201 from the job's end; a client that goes away cancels
  // it while it is queued. The body (a program) is parsed on the tenant's
  // lane when larger than 8 KiB.
  constexpr size_t kCaptureInlineBody = 8 << 10;
  r.add_async(
      "POST", "/v1/graphs",
      [&app](HttpRequest& req, const std::shared_ptr<AsyncReply>& reply) {
        Tenant& tenant = request_tenant(req);
        GraphCaptureRequest cr = graph_capture_from_body(req.body);
        std::shared_ptr<Job> job = app.graphs->capture_async(
            tenant, std::move(cr), req.request_id, [reply](Job& j, const std::shared_ptr<CapturedGraph>& g) {
              std::optional<Error> err = j.error();
              reply->finish(false, [g, err]() {
                if (!g) throw err ? *err : Error(ErrorCode::kInternal, "the capture ended without a graph");
                HttpResponse resp = json_response(201, graph_info_to_json(graph_info(*g)));
                resp.headers.emplace_back("Location", "/v1/graphs/" + g->id);
                return resp;
              });
            });
        cancel_when_client_goes(reply, job);
      },
      kCaptureInlineBody);

  // Answered from the job's end, like /v1/run (answer_job). A replay's body
  // is only inputs to decode (no program): up to 32 KiB on the io thread.
  constexpr size_t kReplayInlineBody = 32 << 10;
  r.add_async(
      "POST", "/v1/graphs/{id}/replay",
      [&app](HttpRequest& req, const std::shared_ptr<AsyncReply>& reply) {
        Tenant& tenant = request_tenant(req);
        auto g = app.graphs->find(tenant, req.params.at("id"));
        JobSpec spec = parse_replay_request(req);
        spec.request_id = req.request_id;
        spec.body_charge = std::move(req.body_charge);
        const bool st = wants_safetensors(req);
        const bool b64 = b64_requested(req);
        start_graph_replay(app, tenant, g, std::move(spec), reply,
                           [reply, st, b64](Job& j) { answer_job(j, reply, st, b64); });
      },
      kReplayInlineBody, BodyKind::kCharged);

  r.add("GET", "/v1/graphs/{id}", [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    auto fmt = req.query.find("format");
    if (fmt == req.query.end() || fmt->second == "json") {
      return json_response(200, graph_info_to_json(app.graphs->info(tenant, req.params.at("id"))));
    }
    auto g = app.graphs->find(tenant, req.params.at("id"));
    if (fmt->second == "dot") {
      HttpResponse resp;
      resp.content_type = "text/vnd.graphviz";
      resp.body = graph_to_dot(*g->program, g->id);
      return resp;
    }
    throw Error(ErrorCode::kBadRequest, "format must be \"json\" or \"dot\"");
  });

  r.add("DELETE", "/v1/graphs/{id}", [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    app.graphs->erase(tenant, req.params.at("id"));
    HttpResponse resp;
    resp.status = 204;
    resp.content_type.clear();
    return resp;
  });
}

}  // namespace tensord
