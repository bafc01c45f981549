#include "server/stream_service.h"

#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <map>

#include "metrics/metrics.h"
#include "scheduler/engine.h"
#include "scheduler/tenant_registry.h"
#include "server/auth.h"

namespace tensord {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void key(Writer& w, const std::string& k) {
  w.Key(k.c_str(), static_cast<rapidjson::SizeType>(k.size()));
}
void str(Writer& w, const std::string& s) {
  w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
}

std::string label(const prometheus::ClientMetric& m, const std::string& name) {
  for (const auto& l : m.label) {
    if (l.name == name) return l.value;
  }
  return {};
}

}  // namespace

StreamService::StreamService(Engine* engine, TenantRegistry* tenants) : engine_(engine), tenants_(tenants) {}

StreamViewer StreamService::authenticate(const HttpRequest& req) const {
  const Tenant& t = ::tensord::authenticate(req, *tenants_);
  return StreamViewer{t.name, t.admin() || tenants_->anonymous()};
}

std::string StreamService::metrics_snapshot(const StreamViewer& viewer) const {
  auto visible = [&](const std::string& tenant) { return viewer.see_all || tenant == viewer.tenant; };
  // Cumulative counters from the registry: requests by code, jobs by state.
  std::map<std::string, double> by_code, by_state;
  for (const auto& fam : metrics_registry().Collect()) {
    if (fam.name == "tensord_http_requests_total" && viewer.see_all) {
      for (const auto& m : fam.metric) by_code[label(m, "code")] += m.counter.value;
    } else if (fam.name == "tensord_jobs_total") {
      for (const auto& m : fam.metric) {
        if (visible(label(m, "tenant"))) by_state[label(m, "state")] += m.counter.value;
      }
    }
  }
  SchedulerStats stats = engine_->stats();
  std::string own_partition;
  if (const Tenant* t = tenants_->by_name(viewer.tenant)) own_partition = t->partition;

  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("type");
  w.String("metrics");
  w.Key("time");
  w.Double(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  w.Key("uptime_s");
  w.Double(std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  if (viewer.see_all) {
    w.Key("requests");
    w.StartObject();
    for (const auto& [code, n] : by_code) {
      key(w, code);
      w.Int64(static_cast<int64_t>(n));
    }
    w.EndObject();
  }
  int64_t queued = 0, running = 0;
  w.Key("partitions");
  w.StartArray();
  for (const auto& p : stats.partitions) {
    if (!viewer.see_all && p.name != own_partition) continue;
    w.StartObject();
    w.Key("name");
    str(w, p.name);
    w.Key("inflight");
    w.Int(p.inflight);
    w.Key("limit");
    w.Int(p.limit);
    w.Key("queued");
    w.Int64(p.queued);
    w.Key("busy_seconds");
    w.Double(p.busy_seconds);
    w.EndObject();
  }
  w.EndArray();
  w.Key("tenants");
  w.StartArray();
  for (const auto& t : stats.tenants) {
    if (!visible(t.name)) continue;
    queued += t.queued;
    running += t.running;
    w.StartObject();
    w.Key("name");
    str(w, t.name);
    w.Key("partition");
    str(w, t.partition);
    w.Key("queued");
    w.Int64(t.queued);
    w.Key("running");
    w.Int(t.running);
    w.Key("busy_seconds");
    w.Double(t.busy_seconds);
    if (const Tenant* tt = tenants_->by_name(t.name)) {
      w.Key("memory_bytes");
      w.Int64(tt->account->used());
      w.Key("memory_limit_bytes");
      w.Int64(tt->account->limit());
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("jobs");
  w.StartObject();
  w.Key("queued");
  w.Int64(queued);
  w.Key("running");
  w.Int64(running);
  for (const char* s : {"succeeded", "failed", "cancelled"}) {
    w.Key(s);
    w.Int64(static_cast<int64_t>(by_state[s]));
  }
  w.EndObject();
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

}  // namespace tensord
