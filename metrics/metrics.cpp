#include "metrics/metrics.h"

#include <mutex>
#include <utility>

#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "metrics/process_collector.h"

namespace tensord {

prometheus::Registry& metrics_registry() {
  // Leaked on purpose: components keep Counter& / Histogram& in statics that
  // may be used during exit, after function-local statics are destroyed.
  static auto* registry = new prometheus::Registry();
  return *registry;
}

namespace {
const ProcessCollector& process_collector() {
  static const auto* collector = new ProcessCollector();
  return *collector;
}
struct Collectors {
  std::mutex mu;
  std::vector<std::function<std::vector<prometheus::MetricFamily>()>> list;
  uint64_t next_hook = 1;
  std::vector<std::pair<uint64_t, std::function<void()>>> hooks;  // under mu
};
Collectors& collectors() {
  static auto* c = new Collectors();  // leaked, as the registry
  return *c;
}

void append(std::vector<prometheus::MetricFamily>& to, std::vector<prometheus::MetricFamily> more) {
  to.insert(to.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
}
}  // namespace

void register_collector(std::function<std::vector<prometheus::MetricFamily>()> collect) {
  Collectors& c = collectors();
  std::lock_guard lock(c.mu);
  c.list.push_back(std::move(collect));
}

ScrapeHook::ScrapeHook(std::function<void()> refresh) {
  Collectors& c = collectors();
  std::lock_guard lock(c.mu);
  id_ = c.next_hook++;
  c.hooks.emplace_back(id_, std::move(refresh));
}

ScrapeHook::~ScrapeHook() {
  if (id_ == 0) return;
  Collectors& c = collectors();
  std::lock_guard lock(c.mu);  // a collection running the hook finishes first
  for (auto it = c.hooks.begin(); it != c.hooks.end(); ++it) {
    if (it->first == id_) {
      c.hooks.erase(it);
      break;
    }
  }
}

std::vector<prometheus::MetricFamily> collect_metrics() {
  Collectors& c = collectors();
  std::lock_guard lock(c.mu);
  for (const auto& [id, refresh] : c.hooks) refresh();
  auto families = metrics_registry().Collect();
  for (const auto& f : c.list) append(families, f());
  return families;
}

std::string render_metrics() {
  auto families = collect_metrics();
  append(families, process_collector().Collect());
  return prometheus::TextSerializer().Serialize(families);
}

void register_build_info(const std::string& version, const std::string& backend) {
  static std::mutex mu;
  static prometheus::Gauge* current = nullptr;
  std::lock_guard lock(mu);
  auto& family = prometheus::BuildGauge()
                     .Name("tensord_build_info")
                     .Help("Build and runtime information; always 1.")
                     .Register(metrics_registry());
  auto& gauge = family.Add({{"version", version}, {"backend", backend}});
  if (current != nullptr && current != &gauge) family.Remove(current);
  gauge.Set(1);
  current = &gauge;
}

}  // namespace tensord
