// /healthz /readyz /v2/health/* /v1/info /v1/ops /metrics
#include <chrono>
#include <mutex>
#include <optional>

#include "api/info_json.h"
#include "api/ops_json.h"
#include "metrics/metrics.h"
#include "ops/backend.h"
#include "ops/error.h"
#include "ops/op_registry.h"
#include "scheduler/engine.h"
#include "scheduler/rank_workers.h"
#include "server/app.h"
#include "server/auth.h"

namespace tensord {

namespace {

ServerInfo server_info(const AppContext& app) {
  Backend& be = app.engine->backend();
  ServerInfo info;
  info.version = app.version;
  info.backend = std::string(be.name());
  info.compiled_backends = compiled_backends();
  info.libraries = be.libraries();
  info.devices = app.engine->devices();
  SchedulerStats stats = app.engine->stats();
  for (const auto& p : app.engine->config().partitions) {
    ServerInfo::Partition part{p.name, p.share, p.workqueue_limit, std::nullopt};
    for (const auto& ps : stats.partitions) {
      if (ps.name == p.name) part.stats = ps;
    }
    info.partitions.push_back(std::move(part));
  }
  info.ranks_local = app.engine->ranks().size();
  info.ranks_world = app.engine->ranks().world();
  info.rank_offset = app.engine->ranks().offset();
  info.max_body_bytes = app.max_body_bytes;
  info.uptime_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - app.started).count();
  return info;
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
  // Rendered once: /healthz answers at the rate of a static file server.
  auto live = [body = health_to_json("ok")](HttpRequest&) { return json_response(200, body); };
  auto ready = [&app, body = health_to_json("ready")](HttpRequest&) {
    if (app.draining && app.draining()) throw Error(ErrorCode::kUnavailable, "draining for shutdown");
    if (app.engine->devices().empty()) throw Error(ErrorCode::kUnavailable, "backend has no device");
    return json_response(200, body);
  };
  r.add("GET", "/healthz", live, Access::kPublic);
  r.add("GET", "/v2/health/live", live, Access::kPublic);
  r.add("GET", "/readyz", ready, Access::kPublic);
  r.add("GET", "/v2/health/ready", ready, Access::kPublic);
  // With tenants configured these need a token (API.md 9): what runs where
  // (partitions, cores, devices) is not for anonymous callers.
  r.add("GET", "/v1/info", [&app](HttpRequest&) { return json_response(200, server_info_to_json(server_info(app))); });
  // The op table never changes after start: render it once.
  auto ops = std::make_shared<std::string>();
  r.add("GET", "/v1/ops", [ops](HttpRequest&) {
    static std::once_flag once;
    std::call_once(once, [&] { *ops = ops_to_json(op_listings()); });
    return json_response(200, *ops);
  });
  r.add(
      "GET", "/metrics",
      [](HttpRequest&) {
        HttpResponse resp;
        resp.content_type = "text/plain; version=0.0.4; charset=utf-8";
        resp.body = render_metrics();
        return resp;
      },
      Access::kPublic);
}

}  // namespace tensord
