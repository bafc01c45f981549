#include "metrics/metrics.h"

#include <mutex>

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
}  // namespace

std::string render_metrics() {
  auto families = metrics_registry().Collect();
  auto process = process_collector().Collect();
  families.insert(families.end(), std::make_move_iterator(process.begin()), std::make_move_iterator(process.end()));
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
