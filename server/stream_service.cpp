#include "server/stream_service.h"

#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <chrono>
#include <map>

#include "metrics/metrics.h"
#include "scheduler/engine.h"
#include "scheduler/tenant_registry.h"
#include "server/auth.h"

namespace tensord {
namespace {

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

MetricsSnapshot StreamService::metrics_snapshot(const StreamViewer& viewer) const {
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

  MetricsSnapshot snap;
  snap.time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  snap.uptime_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  if (viewer.see_all) {
    snap.requests.emplace();
    for (const auto& [code, n] : by_code) (*snap.requests)[code] = static_cast<int64_t>(n);
  }
  for (const auto& p : stats.partitions) {
    if (!viewer.see_all && p.name != own_partition) continue;
    snap.partitions.push_back({p.name, p.inflight, p.limit, p.queued, p.busy_seconds});
  }
  for (const auto& t : stats.tenants) {
    if (!visible(t.name)) continue;
    snap.jobs_queued += t.queued;
    snap.jobs_running += t.running;
    MetricsSnapshot::Tenant mt{t.name, t.partition, t.queued, t.running, t.busy_seconds, std::nullopt, std::nullopt};
    if (const Tenant* tt = tenants_->by_name(t.name)) {
      mt.memory_bytes = tt->account->used();
      mt.memory_limit_bytes = tt->account->limit();
    }
    snap.tenants.push_back(std::move(mt));
  }
  snap.jobs_succeeded = static_cast<int64_t>(by_state["succeeded"]);
  snap.jobs_failed = static_cast<int64_t>(by_state["failed"]);
  snap.jobs_cancelled = static_cast<int64_t>(by_state["cancelled"]);
  return snap;
}

}  // namespace tensord
