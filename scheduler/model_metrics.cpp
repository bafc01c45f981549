#include "scheduler/model_metrics.h"

#include <prometheus/metric_family.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <utility>

#include "graphs/graph_store.h"
#include "metrics/metrics.h"

namespace tensord {

namespace {

// The live stores: a store joins the collector while it lives (unit tests
// make many; the server one), so the collector, registered once, never
// reads a destroyed one.
std::mutex& stores_mu() {
  static std::mutex mu;
  return mu;
}
std::vector<const GraphStore*>& stores() {
  static std::vector<const GraphStore*> v;
  return v;
}

prometheus::MetricFamily family(const char* name, const char* help) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = prometheus::MetricType::Counter;
  return f;
}

void add(prometheus::MetricFamily& f, const CapturedGraph& g, double value,
         std::vector<prometheus::ClientMetric::Label> extra = {}) {
  prometheus::ClientMetric m;
  m.label = {{"model", g.name.empty() ? g.id : g.name}, {"tenant", g.tenant}};
  for (auto& l : extra) m.label.push_back(std::move(l));
  // Sorted by name, as the registry's own families write theirs.
  std::sort(m.label.begin(), m.label.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  m.counter.value = value;
  f.metric.push_back(std::move(m));
}

double seconds(const ModelStats::Duration& d) {
  return static_cast<double>(d.ns.load(std::memory_order_relaxed)) / 1e9;
}
double count(const std::atomic<uint64_t>& c) {
  return static_cast<double>(c.load(std::memory_order_relaxed));
}

}  // namespace

ModelMetrics::ModelMetrics(const GraphStore& store) : store_(store) {
  static std::once_flag once;
  std::call_once(once, [] { register_collector([] { return ModelMetrics::collect(); }); });
  std::lock_guard lk(stores_mu());
  stores().push_back(&store_);
}

ModelMetrics::~ModelMetrics() {
  std::lock_guard lk(stores_mu());
  auto& v = stores();
  v.erase(std::remove(v.begin(), v.end(), &store_), v.end());
}

std::vector<prometheus::MetricFamily> ModelMetrics::collect() {
  auto requests = family("tensord_model_requests_total", "KServe infer requests per model, by outcome");
  auto request_s = family("tensord_model_request_seconds_total", "Time of KServe infer requests per model, by outcome");
  auto inferences = family("tensord_model_inferences_total", "Inferences per model");
  auto executions = family("tensord_model_executions_total", "Replays run for KServe inference per model");
  auto stage_s = family("tensord_model_stage_seconds_total",
                        "Time of successful KServe infer requests per model, by stage (queue, compute_input, "
                        "compute_infer, compute_output)");
  std::lock_guard lk(stores_mu());
  for (const GraphStore* s : stores()) {
    for (const auto& g : s->list_all()) {
      const ModelStats& st = g->stats;
      add(requests, *g, count(st.success.count), {{"outcome", "success"}});
      add(requests, *g, count(st.fail.count), {{"outcome", "fail"}});
      add(request_s, *g, seconds(st.success), {{"outcome", "success"}});
      add(request_s, *g, seconds(st.fail), {{"outcome", "fail"}});
      add(inferences, *g, count(st.inference_count));
      add(executions, *g, count(st.execution_count));
      add(stage_s, *g, seconds(st.queue), {{"stage", "queue"}});
      add(stage_s, *g, seconds(st.compute_input), {{"stage", "compute_input"}});
      add(stage_s, *g, seconds(st.compute_infer), {{"stage", "compute_infer"}});
      add(stage_s, *g, seconds(st.compute_output), {{"stage", "compute_output"}});
    }
  }
  return {std::move(requests), std::move(request_s), std::move(inferences), std::move(executions), std::move(stage_s)};
}

}  // namespace tensord
