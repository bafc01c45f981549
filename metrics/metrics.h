// The process-wide Prometheus registry and its text export.
// Components register their own families on metrics_registry() (STYLE.md
// item 11); this folder only owns the registry, the process_* metrics and the
// export. Thread-safe: prometheus-cpp families and metrics are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace prometheus {
class Registry;
struct MetricFamily;
}  // namespace prometheus

namespace tensord {

// The one registry of the process, created on first use and never destroyed
// (metric references handed out by it stay valid until exit).
prometheus::Registry& metrics_registry();

// Every family: the registry's and the collectors' (below), without process_*.
std::vector<prometheus::MetricFamily> collect_metrics();

// Prometheus text exposition format (0.0.4) of every registered family plus
// process_resident_memory_bytes, process_cpu_seconds_total, process_open_fds
// and process_start_time_seconds, read from /proc at call time.
std::string render_metrics();

// Families a component keeps outside the registry (its own counters, read
// at scrape time) join render_metrics' output through `collect`. Collectors
// are never removed: register a process-lifetime object's.
void register_collector(std::function<std::vector<prometheus::MetricFamily>()> collect);

// Gauges that mirror state held elsewhere (a tenant's bytes, which change
// whenever a tensor is freed, wherever that happens) are refreshed just
// before each collection by a hook: registered by the owner of that state,
// removed with the returned handle's destruction.
class ScrapeHook {
 public:
  ScrapeHook() = default;
  explicit ScrapeHook(std::function<void()> refresh);
  ~ScrapeHook();
  ScrapeHook(const ScrapeHook&) = delete;
  ScrapeHook& operator=(const ScrapeHook&) = delete;

 private:
  uint64_t id_ = 0;
};

// tensord_build_info{version, backend} = 1. Calling again replaces the series.
void register_build_info(const std::string& version, const std::string& backend);

}  // namespace tensord
