// KServe v2 inference (Open Inference Protocol) over captured graphs, with
// Triton's extensions (API.md 11, 11.1):
//   GET  /v2                                  {name, version, extensions}
//   GET  /v2/models/{model}                   {name, versions, platform, inputs, outputs}
//   GET  /v2/models/{model}/ready             200 when it can be replayed
//   GET  /v2/models/{model}/config            Triton's model configuration
//   GET  /v2/models/{model}/stats             Triton's statistics; /v2/models/stats: every model
//   POST /v2/models/{model}/infer             inference (JSON, binary tensor data extension)
//   POST /v2/repository/index                 the tenant's models
//   POST /v2/repository/models/{model}/load|unload   400: models are captured through /v1/graphs
// and the model routes under /v2/models/{model}/versions/{version}/ (version "1").
// A model is one of the caller's captured graphs, by name or by id; another
// tenant's is unknown (404). /infer queues the graph's replay exactly as
// /v1/graphs/{id}/replay does (start_graph_replay). Bodies may come gzip or
// deflate compressed, and answers are compressed for an Accept-Encoding
// that asks (server/content_coding.h). Errors answer {"error": "<message>"}:
// the session picks that shape for /v2 paths.
#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include "api/kserve_extensions_json.h"
#include "api/kserve_json.h"
#include "graphs/graph_store.h"
#include "ops/backend.h"
#include "ops/error.h"
#include "scheduler/engine.h"
#include "scheduler/graph_service.h"
#include "scheduler/job.h"
#include "scheduler/tenant.h"
#include "server/auth.h"
#include "server/content_coding.h"
#include "server/graph_routes.h"
#include "server/shm_registry.h"

namespace tensord {

namespace {

using Clock = std::chrono::steady_clock;

// What GET /v2 lists: exactly the extensions these routes implement (and
// system_shared_memory where its routes are: app.shm).
std::vector<std::string_view> extensions(const AppContext& app) {
  std::vector<std::string_view> e = {"binary_tensor_data", "model_configuration", "statistics", "model_repository"};
  if (app.shm) e.emplace_back("system_shared_memory");
  return e;
}

// The caller's region `name` (a request naming another tenant's, or none,
// is told it is unknown).
std::shared_ptr<const ShmRegion> region_of(const AppContext& app, const Tenant& tenant, const std::string& name) {
  auto r = app.shm ? app.shm->find(tenant.name, name) : nullptr;
  if (!r) {
    throw Error(ErrorCode::kBadRequest, "unknown shared memory region '" + name.substr(0, 128) + "'");
  }
  return r;
}

// Inputs whose bytes are in shared memory, read into their tensors (sized
// by kserve_infer_from_body).
void read_shm_inputs(const AppContext& app, const Tenant& tenant, KServeInferRequest& ir) {
  for (const auto& in : ir.shm_inputs) {
    auto region = region_of(app, tenant, in.ref.region);
    Tensor& t = ir.inputs.at(in.name);
    if (t.nbytes()) region->read(in.ref.offset, t.data(), t.nbytes());
    if (t.dtype() == DType::kBool) check_kserve_bool_bytes(t, in.name);
  }
}

uint64_t ns_since(Clock::time_point t0) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}
uint64_t ms_to_ns(double ms) {
  return ms > 0 ? static_cast<uint64_t>(ms * 1e6) : 0;
}

std::shared_ptr<CapturedGraph> find_model(const GraphService& graphs, const HttpRequest& req, const Tenant& tenant) {
  const std::string& model = req.params.at("model");
  auto v = req.params.find("version");
  if (v != req.params.end() && v->second != "1") {
    throw Error(ErrorCode::kNotFound, "model '" + model.substr(0, 128) + "' has no version '" +
                                          v->second.substr(0, 64) + "' (its versions: 1)");
  }
  auto g = graphs.find_model(tenant, model);
  if (!g) throw Error(ErrorCode::kNotFound, "unknown model '" + model.substr(0, 128) + "'");
  return g;
}

std::string model_name(const CapturedGraph& g) {
  return g.name.empty() ? g.id : g.name;
}

KServeModel model_of(const CapturedGraph& g) {
  KServeModel m;
  m.name = model_name(g);
  for (const auto& [name, id] : g.program->inputs) {
    m.inputs.push_back({name, g.program->values[static_cast<size_t>(id)].meta});
  }
  for (const auto& [name, id] : g.program->outputs) {
    m.outputs.push_back({name, g.program->values[static_cast<size_t>(id)].meta});
  }
  return m;
}

KServeModelStats stats_of(const CapturedGraph& g) {
  const ModelStats& s = g.stats;
  auto d = [](const ModelStats::Duration& x) {
    return KServeDurationStat{x.count.load(std::memory_order_relaxed), x.ns.load(std::memory_order_relaxed)};
  };
  KServeModelStats k;
  k.name = model_name(g);
  k.last_inference_ms = s.last_inference_ms.load(std::memory_order_relaxed);
  k.inference_count = s.inference_count.load(std::memory_order_relaxed);
  k.execution_count = s.execution_count.load(std::memory_order_relaxed);
  k.success = d(s.success);
  k.fail = d(s.fail);
  k.queue = d(s.queue);
  k.compute_input = d(s.compute_input);
  k.compute_infer = d(s.compute_infer);
  k.compute_output = d(s.compute_output);
  return k;
}

// A /v2 JSON answer, compressed when the request's Accept-Encoding asks.
HttpResponse kserve_json(const HttpRequest& req, int status, std::string body) {
  HttpResponse resp = json_response(status, std::move(body));
  if (auto c = accepted_coding(req.header("accept-encoding"))) compress_response(resp, *c);
  return resp;
}

// A compressed infer body that came without a Content-Length (chunked:
// one with a length was inflated as it arrived, BodyKind::kInflated, and
// has no Content-Encoding left), inflated here: its inflated size is
// checked against --max-body-bytes and charged to the tenant as it grows
// (the compressed body's charge is released once it is inflated). The
// charge is returned: the job holds it while it holds the inputs.
std::shared_ptr<void> inflate_request(HttpRequest& req, ContentCoding coding, Tenant& tenant, size_t max_bytes) {
  auto account = tenant.account;
  auto charged = std::make_shared<int64_t>(0);
  std::shared_ptr<void> charge(nullptr, [account, charged](void*) {
    if (*charged > 0) account->release(*charged);
  });
  std::string inflated = inflate_body(req.body, coding, max_bytes, [&](size_t total) {
    const auto t = static_cast<int64_t>(total);
    if (t < *charged) {
      account->release(*charged - t);
    } else {
      account->charge(t - *charged);  // throws quota_exceeded: nothing more charged, `charge` releases the rest
    }
    *charged = t;
  });
  req.body = std::move(inflated);
  req.body_charge.reset();
  return charge;
}

// Answers an /infer from its replay's end: the requested outputs as KServe
// JSON, with the binary ones' bytes after it (written from the tensors' own
// memory), or the job's error; the model's statistics count it.
struct InferAnswer {
  std::shared_ptr<CapturedGraph> graph;
  std::string model;
  std::optional<std::string> id;
  std::vector<KServeOutputRequest> wanted;
  std::optional<ContentCoding> coding;
  Clock::time_point started;
  uint64_t input_ns = 0;
  // The regions outputs are written to, by output name (held: a region
  // unregistered meanwhile is closed once this answer lets go of it).
  std::map<std::string, std::shared_ptr<const ShmRegion>> out_regions;
};

// Writes the outputs asked for in shared memory into their regions.
void write_shm_outputs(const InferAnswer& a, const std::vector<std::pair<KServeOutputRequest, Tensor>>& outs) {
  for (const auto& [w, t] : outs) {
    if (!w.shm) continue;
    if (t.nbytes() > w.shm->byte_size) {
      throw Error(ErrorCode::kBadRequest, "output '" + w.name + "' has " + std::to_string(t.nbytes()) +
                                              " bytes; shared_memory_byte_size is " + std::to_string(w.shm->byte_size));
    }
    if (t.nbytes()) a.out_regions.at(w.name)->write(w.shm->offset, t.data(), t.nbytes());
  }
}

void answer_infer(Job& job, const std::shared_ptr<AsyncReply>& reply, InferAnswer a) {
  ModelStats* st = &a.graph->stats;  // the graph (in `a`) outlives the answer
  const Clock::time_point started = a.started;
  const bool costly = a.coding.has_value();  // a compressed answer
  auto encode = [a = std::move(a)](const JobResult& res) {
    ModelStats& st = a.graph->stats;
    try {
      const Clock::time_point enc = Clock::now();
      std::vector<std::pair<KServeOutputRequest, Tensor>> outs;
      for (const auto& w : a.wanted) {
        for (const auto& [name, t] : res.outputs) {
          if (name == w.name) outs.emplace_back(w, t);
        }
      }
      write_shm_outputs(a, outs);
      KServeInferResponse kr = kserve_infer_response(a.model, a.id, outs);
      HttpResponse resp;
      if (!kr.binary.empty()) {
        resp.content_type = "application/octet-stream";
        resp.headers.emplace_back("Inference-Header-Content-Length", std::to_string(kr.header.size()));
        for (const Tensor& t : kr.binary) {
          if (t.nbytes()) resp.views.push_back(BodyView{t.data(), t.nbytes(), t.storage(), {}});
        }
      }
      resp.body = std::move(kr.header);
      if (a.coding) compress_response(resp, *a.coding);
      st.compute_output.add(ns_since(enc));
      st.queue.add(ms_to_ns(res.queue_ms));
      st.compute_infer.add(ms_to_ns(res.run_ms));
      st.compute_input.add(a.input_ns);
      st.inference_count.fetch_add(1, std::memory_order_relaxed);
      st.execution_count.fetch_add(1, std::memory_order_relaxed);
      st.last_inference_ms.store(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count(),
          std::memory_order_relaxed);
      st.success.add(ns_since(a.started));
      return resp;
    } catch (...) {
      st.fail.add(ns_since(a.started));
      throw;
    }
  };
  answer_job_with(job, reply, std::move(encode), costly, [st, started] { st->fail.add(ns_since(started)); });
}

void add_model_routes(Router& r, AppContext& app, const std::string& prefix) {
  r.add("GET", prefix, [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    return kserve_json(req, 200, kserve_model_metadata_json(model_of(*find_model(*app.graphs, req, tenant))));
  });

  r.add("GET", prefix + "/ready", [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    KServeModel m = model_of(*find_model(*app.graphs, req, tenant));
    check_kserve_dtypes(m);  // a model KServe cannot feed is not ready: 400 naming the dtype
    return kserve_json(req, 200, kserve_model_ready_json(m.name));
  });

  r.add("GET", prefix + "/config", [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    KServeModel m = model_of(*find_model(*app.graphs, req, tenant));
    const bool gpu = app.engine->backend().name() != "cpu";
    return kserve_json(req, 200, kserve_model_config_json(m, tenant.partition, gpu));
  });

  r.add("GET", prefix + "/stats", [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    return kserve_json(req, 200, kserve_model_stats_json({stats_of(*find_model(*app.graphs, req, tenant))}));
  });

  // As /v1/graphs/{id}/replay: bodies up to 32 KiB are decoded on the io
  // thread, the answer comes from the job's end.
  constexpr size_t kInferInlineBody = 32 << 10;
  r.add_async(
      "POST", prefix + "/infer",
      [&app](HttpRequest& req, const std::shared_ptr<AsyncReply>& reply) {
        const Clock::time_point started = Clock::now();
        Tenant& tenant = request_tenant(req);
        auto g = find_model(*app.graphs, req, tenant);
        try {
          if (g->spmd) {
            throw Error(ErrorCode::kBadRequest, "model '" + model_name(*g) +
                                                    "' was captured with ranks: KServe inference does not run SPMD "
                                                    "graphs (replay it through /v1/graphs/{id}/replay)");
          }
          std::shared_ptr<void> charge = std::move(req.body_charge);
          if (auto coding = request_coding(req.header("content-encoding"))) {
            charge = inflate_request(req, *coding, tenant, app.max_body_bytes);
          }
          KServeModel m = model_of(*g);
          KServeInferRequest ir = kserve_infer_from_body(
              req.body, parse_inference_header_length(req.header("inference-header-content-length")), m);
          read_shm_inputs(app, tenant, ir);
          std::map<std::string, std::shared_ptr<const ShmRegion>> out_regions;
          for (const auto& o : ir.outputs) {
            if (o.shm) out_regions[o.name] = region_of(app, tenant, o.shm->region);
          }
          JobSpec spec;
          spec.inputs = std::move(ir.inputs);
          if (ir.outputs_named) {
            std::vector<std::string> names;
            for (const auto& o : ir.outputs) names.push_back(o.name);
            spec.return_names = std::move(names);
          }
          if (ir.timeout_us > 0) spec.deadline_ms = (ir.timeout_us + 999) / 1000;
          spec.request_id = req.request_id;
          spec.body_charge = std::move(charge);
          InferAnswer a{g,
                        m.name,
                        std::move(ir.id),
                        std::move(ir.outputs),
                        accepted_coding(req.header("accept-encoding")),
                        started,
                        ns_since(started),
                        std::move(out_regions)};
          start_graph_replay(app, tenant, g, std::move(spec), reply,
                             [reply, a = std::move(a)](Job& j) mutable { answer_infer(j, reply, std::move(a)); });
        } catch (...) {
          g->stats.fail.add(ns_since(started));
          throw;
        }
      },
      kInferInlineBody, BodyKind::kInflated);
}

void add_repository_routes(Router& r, AppContext& app) {
  r.add("POST", "/v2/repository/index", [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    kserve_repository_index_ready_only(req.body);  // validated; every listed model is ready
    std::vector<std::string> names;
    for (const auto& g : app.graphs->list(tenant)) names.push_back(model_name(*g));
    std::sort(names.begin(), names.end());
    return kserve_json(req, 200, kserve_repository_index_json(names));
  });
  // Loading and unloading are Triton's model control; a tensord model is a
  // captured graph, made and deleted through /v1/graphs. Unload does not
  // delete: Model Analyzer and other tools unload what they profiled, which
  // must not destroy a user's graph.
  r.add("POST", "/v2/repository/models/{model}/load", [](HttpRequest& req) -> HttpResponse {
    throw Error(ErrorCode::kBadRequest,
                "models are captured through POST /v1/graphs (with a \"name\"), not loaded from a repository");
  });
  r.add("POST", "/v2/repository/models/{model}/unload", [](HttpRequest& req) -> HttpResponse {
    throw Error(ErrorCode::kBadRequest,
                "models are captured graphs and stay until DELETE /v1/graphs/{id}; unload does not delete them");
  });
}

}  // namespace

void add_kserve_routes(Router& r, AppContext& app) {
  // Server metadata: behind the token like every route but health (API.md 9).
  r.add("GET", "/v2", [&app](HttpRequest& req) {
    return kserve_json(req, 200, kserve_server_metadata_json(app.version, extensions(app)));
  });
  // Every model of the caller (a param-free route: it wins over {model}).
  r.add("GET", "/v2/models/stats", [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    std::vector<KServeModelStats> all;
    for (const auto& g : app.graphs->list(tenant)) all.push_back(stats_of(*g));
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    return kserve_json(req, 200, kserve_model_stats_json(all));
  });
  add_model_routes(r, app, "/v2/models/{model}");
  add_model_routes(r, app, "/v2/models/{model}/versions/{version}");
  add_repository_routes(r, app);
}

}  // namespace tensord
