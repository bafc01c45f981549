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
#include <mutex>

#include "api/graph_json.h"
#include "api/program_json.h"
#include "api/safetensors.h"
#include "graphs/compiled_program.h"
#include "graphs/graph_store.h"
#include "ops/error.h"
#include "scheduler/engine.h"
#include "scheduler/job_handle.h"
#include "scheduler/rank_workers.h"
#include "scheduler/spmd_plan.h"
#include "scheduler/tenant.h"
#include "server/app.h"
#include "server/auth.h"
#include "server/graph_routes.h"

namespace tensord {

namespace {

void throw_if_capturing(const GraphStore& store, const std::string& id, const Tenant& tenant) {
  if (store.capturing(tenant.name, id)) throw Error(ErrorCode::kConflict, "graph '" + id + "' is still capturing");
}

std::shared_ptr<CapturedGraph> find_graph(const GraphStore& store, const HttpRequest& req, const Tenant& tenant) {
  const std::string& id = req.params.at("id");
  auto g = store.find(tenant.name, id);
  if (g) return g;
  throw_if_capturing(store, id, tenant);
  throw Error(ErrorCode::kNotFound, "graph '" + id + "' not found");
}

// A capture with "ranks" (API.md 8): the group's members compiled over
// their input shapes as an SPMD job's are (every rank's program, the
// extents of uneven all_gathers, 422 where ranks disagree at a collective).
std::shared_ptr<CapturedGraph> capture_spmd_graph(AppContext& app, GraphStore& store, Tenant& tenant,
                                                  const GraphCaptureRequest& cr, Device dev) {
  RankWorkers& workers = app.engine->ranks();
  SpmdPlan p;
  p.ranks = spmd_group(*cr.spmd, workers.world());
  for (int r : p.ranks) {
    if (!workers.is_local(r)) {
      throw Error(ErrorCode::kBadRequest, "graphs with ranks on other servers are not supported yet: rank " +
                                              std::to_string(r) + " is not one of this server's (ranks " +
                                              std::to_string(workers.offset()) + ".." +
                                              std::to_string(workers.offset() + workers.size() - 1) + ")");
    }
  }
  p.group = spmd_group_name(p.ranks, workers.world());
  auto stored_lookup = [&tenant](const std::string& n) { return tenant.store.get(n); };
  auto compile = [&] {
    compile_spmd_declared(p, cr.program, cr.inputs, cr.per_rank, stored_lookup);
    return p.programs;
  };
  auto scope = [&p](const std::function<void()>& bind) { in_spmd_infer_scope(p, bind); };
  return store.capture_spmd(tenant.name, tenant.account, &app.engine->backend(), dev, compile, scope, p.ranks, p.group,
                            cr.name);
}

JobSpec parse_replay_request(HttpRequest& req) {
  if (is_safetensors_body(req)) {
    auto body = std::make_shared<const std::string>(std::move(req.body));
    SafetensorsFile f = parse_safetensors(body);
    std::map<std::string, Tensor> inputs;
    for (auto& [name, t] : f.tensors) inputs.emplace(name, std::move(t));
    auto it = f.metadata.find("request");
    if (it == f.metadata.end()) {
      rapidjson::Document empty;
      empty.SetObject();
      return graph_replay_from_json(empty, std::move(inputs));
    }
    rapidjson::Document d = parse_json_object(it->second, "__metadata__.request");
    return graph_replay_from_json(d, std::move(inputs));
  }
  rapidjson::Document d = parse_json_object_insitu(req.body, "body");
  return graph_replay_from_json(d, {});
}

}  // namespace

void start_graph_replay(AppContext& app, Tenant& tenant, const std::shared_ptr<CapturedGraph>& g, JobSpec spec,
                        const std::shared_ptr<AsyncReply>& reply, std::function<void(Job&)> answer) {
  spec.graph_id = g->id;  // /v1/trace: the replay's op and run spans name their graph
  for (const auto& [out, stored_name] : spec.store) {
    for (const auto& [name, id] : g->program->outputs) {
      if (name == out && g->program->values[static_cast<size_t>(id)].source == ValueInfo::Source::kInput) {
        throw Error(ErrorCode::kBadRequest, "store: output '" + out + "' is a graph input; store the input itself");
      }
    }
  }
  auto on_end = [g, answer = std::move(answer)](Job& j) {
    // Counted before the answer goes out: a client that
    // reads the graph right after its reply sees this replay.
    if (j.state() == JobState::kSucceeded) g->replays.fetch_add(1);
    answer(j);
  };
  std::shared_ptr<Job> job;
  if (g->spmd) {
    job = app.engine->replay_spmd_async(tenant, g->spmd, std::move(spec), std::move(on_end));
  } else {
    if (spec.spmd) {
      throw Error(ErrorCode::kBadRequest, "graph '" + g->id +
                                              "' was captured without \"ranks\": a replay of it takes no \"ranks\", "
                                              "per_rank or shard inputs (API.md 8)");
    }
    g->plan->check_inputs(spec.inputs);  // 409 before anything is queued
    job = app.engine->replay_async(tenant, g->plan, g->pool, std::move(spec), std::move(on_end));
  }
  std::weak_ptr<Job> weak = job;
  reply->on_client_gone([weak] {
    if (auto j = weak.lock()) j->cancel("the client closed the connection");
  });
}

void add_graph_routes(Router& r, AppContext& app, const std::shared_ptr<GraphStore>& store) {
  add_offloaded(r, "POST", "/v1/graphs", [&app, store](HttpRequest& req) {
    Tenant& tenant = authenticate(req, *app.tenants);
    rapidjson::Document d = parse_json_object(req.body, "body");
    GraphCaptureRequest cr = graph_capture_from_json(d);
    auto stored_lookup = [&tenant](const std::string& n) { return tenant.store.get(n); };
    const auto& devs = app.engine->devices();
    const Device dev = devs.empty() ? Device{} : devs[0].device;
    std::shared_ptr<CapturedGraph> g;
    if (cr.spmd) {
      g = capture_spmd_graph(app, *store, tenant, cr, dev);
    } else {
      // Validation, binding, shape inference and the memory plan: once, inside
      // the capture (GET /v1/graphs/{id} shows is_capturing meanwhile).
      auto compile = [&cr, &stored_lookup] { return compile_program(cr.program, cr.inputs, stored_lookup); };
      g = store->capture(tenant.name, tenant.account, &app.engine->backend(), dev, compile, cr.pool, cr.name);
    }
    app.engine->record_tenant_memory(tenant);
    app.engine->record_graph_capture(tenant, +1);
    HttpResponse resp = json_response(201, graph_info_to_json(graph_info(*g)));
    resp.headers.emplace_back("Location", "/v1/graphs/" + g->id);
    return resp;
  });

  // Answered from the job's end, like /v1/run (answer_job). A replay's body
  // is only inputs to decode (no program): up to 32 KiB on the io thread.
  constexpr size_t kReplayInlineBody = 32 << 10;
  r.add_async(
      "POST", "/v1/graphs/{id}/replay",
      [&app, store](HttpRequest& req, const std::shared_ptr<AsyncReply>& reply) {
        Tenant& tenant = authenticate(req, *app.tenants);
        auto g = find_graph(*store, req, tenant);
        JobSpec spec = parse_replay_request(req);
        spec.request_id = req.request_id;
        const bool st = wants_safetensors(req);
        auto enc = req.query.find("encoding");
        const bool b64 = enc != req.query.end() && enc->second == "b64";
        start_graph_replay(app, tenant, g, std::move(spec), reply,
                           [reply, st, b64](Job& j) { answer_job(j, reply, st, b64); });
      },
      kReplayInlineBody);

  r.add("GET", "/v1/graphs/{id}", [&app, store](HttpRequest& req) {
    Tenant& tenant = authenticate(req, *app.tenants);
    auto fmt = req.query.find("format");
    if (fmt == req.query.end() || fmt->second == "json") {
      auto info = store->info(tenant.name, req.params.at("id"));
      if (!info) throw Error(ErrorCode::kNotFound, "graph '" + req.params.at("id") + "' not found");
      return json_response(200, graph_info_to_json(*info));
    }
    auto g = find_graph(*store, req, tenant);
    if (fmt->second == "dot") {
      HttpResponse resp;
      resp.content_type = "text/vnd.graphviz";
      resp.body = graph_to_dot(*g->program, g->id);
      return resp;
    }
    throw Error(ErrorCode::kBadRequest, "format must be \"json\" or \"dot\"");
  });

  r.add("DELETE", "/v1/graphs/{id}", [&app, store](HttpRequest& req) {
    Tenant& tenant = authenticate(req, *app.tenants);
    throw_if_capturing(*store, req.params.at("id"), tenant);
    if (!store->erase(tenant.name, req.params.at("id"))) {
      throw Error(ErrorCode::kNotFound, "graph '" + req.params.at("id") + "' not found");
    }
    app.engine->record_tenant_memory(tenant);
    app.engine->record_graph_capture(tenant, -1);
    HttpResponse resp;
    resp.status = 204;
    resp.content_type.clear();
    return resp;
  });
}

}  // namespace tensord
