// /healthz /readyz /v2/health/* /v1/info /v1/ops /metrics
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <mutex>
#include <thread>

#include "api/ops_json.h"
#include "metrics/metrics.h"
#include "ops/backend.h"
#include "ops/error.h"
#include "ops/op_registry.h"
#include "scheduler/engine.h"
#include "server/app.h"
#include "server/auth.h"

namespace tensord {

namespace {
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

std::string info_json(const AppContext& app) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  Backend& be = app.engine->backend();
  w.StartObject();
  w.Key("name");
  w.String("tensord");
  w.Key("version");
  w.String(app.version);
  w.Key("api");
  w.String("v1");
  w.Key("backend");
  w.String(std::string(be.name()));
  w.Key("compiled_backends");
  w.StartArray();
  for (const auto& b : compiled_backends()) w.String(b);
  w.EndArray();
  w.Key("libraries");
  w.StartObject();
  for (const auto& [k, v] : be.libraries()) {
    w.Key(k.c_str(), static_cast<rapidjson::SizeType>(k.size()));
    w.String(v);
  }
  w.EndObject();
  w.Key("devices");
  w.StartArray();
  for (const auto& d : app.engine->devices()) {
    w.StartObject();
    w.Key("device");
    w.String(d.device.str());
    w.Key("name");
    w.String(d.name);
    w.Key("total_memory");
    w.Int64(d.total_memory);
    w.Key("compute_units");
    w.Int(d.compute_units);
    w.EndObject();
  }
  w.EndArray();
  w.Key("ranks");
  w.Int(1);
  w.Key("partitions");
  w.StartArray();
  SchedulerStats stats = app.engine->stats();
  for (const auto& p : app.engine->config().partitions) {
    w.StartObject();
    w.Key("name");
    w.String(p.name.c_str(), static_cast<rapidjson::SizeType>(p.name.size()));
    w.Key("share");
    w.Double(p.share);
    w.Key("workqueue_limit");
    w.Int(p.workqueue_limit);
    for (const auto& ps : stats.partitions) {
      if (ps.name != p.name) continue;
      w.Key("inflight");
      w.Int(ps.inflight);
      w.Key("queued");
      w.Int64(ps.queued);
      w.Key("threads");
      w.Int(ps.threads);
      w.Key("cpus");
      w.StartArray();
      for (int c : ps.cpus) w.Int(c);
      w.EndArray();
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("max_body_bytes");
  w.Uint64(app.max_body_bytes);
  w.Key("uptime_s");
  w.Double(std::chrono::duration<double>(std::chrono::steady_clock::now() - app.started).count());
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

// The registry's ops and the control-flow ops, which run on every backend.
std::vector<OpListing> op_listings() {
  std::vector<OpListing> ops;
  for (const OpDef* op : OpRegistry::global().all()) ops.push_back(op_listing(*op));
  for (const auto& cf : control_flow_op_specs()) ops.push_back(op_listing(cf, compiled_backends()));
  return ops;
}
}  // namespace

void add_info_routes(Router& r, AppContext& app) {
  auto live = [](HttpRequest&) { return json_response(200, "{\"status\":\"ok\"}"); };
  auto ready = [&app](HttpRequest&) {
    if (app.draining && app.draining()) throw Error(ErrorCode::kUnavailable, "draining for shutdown");
    if (app.engine->devices().empty()) throw Error(ErrorCode::kUnavailable, "backend has no device");
    return json_response(200, "{\"status\":\"ready\"}");
  };
  r.add("GET", "/healthz", live);
  r.add("GET", "/v2/health/live", live);
  r.add("GET", "/readyz", ready);
  r.add("GET", "/v2/health/ready", ready);
  // With tenants configured these need a token (API.md 9): what runs where
  // (partitions, cores, devices) is not for anonymous callers.
  r.add("GET", "/v1/info", [&app](HttpRequest& req) {
    authenticate(req, *app.tenants);
    return json_response(200, info_json(app));
  });
  // The op table never changes after start: render it once.
  auto ops = std::make_shared<std::string>();
  r.add("GET", "/v1/ops", [&app, ops](HttpRequest& req) {
    authenticate(req, *app.tenants);
    static std::once_flag once;
    std::call_once(once, [&] { *ops = ops_to_json(op_listings()); });
    return json_response(200, *ops);
  });
  r.add("GET", "/metrics", [](HttpRequest&) {
    HttpResponse resp;
    resp.content_type = "text/plain; version=0.0.4; charset=utf-8";
    resp.body = render_metrics();
    return resp;
  });
}

}  // namespace tensord
