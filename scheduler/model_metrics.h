// The tensord_model_* Prometheus families (API.md 11.1): each captured
// graph's ModelStats, read at scrape time, with tenant and model labels.
// One ModelMetrics per graph store (GraphService owns it beside the store):
// it joins the one process-wide collector while it lives. Thread-safe.
#pragma once

#include <vector>

namespace prometheus {
struct MetricFamily;
}  // namespace prometheus

namespace tensord {

class GraphStore;

class ModelMetrics {
 public:
  explicit ModelMetrics(const GraphStore& store);
  ~ModelMetrics();
  ModelMetrics(const ModelMetrics&) = delete;
  ModelMetrics& operator=(const ModelMetrics&) = delete;

  // The families over every live store's graphs.
  static std::vector<prometheus::MetricFamily> collect();

 private:
  const GraphStore& store_;
};

}  // namespace tensord
