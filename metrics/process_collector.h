// process_* metrics (the names of the Prometheus client libraries' process
// collector), read from /proc on every Collect(). Linux only; on a read
// failure a family is simply left out.
#pragma once

#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

namespace tensord {

class ProcessCollector : public prometheus::Collectable {
 public:
  ProcessCollector();
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  double start_time_seconds_;  // unix time the process started
};

}  // namespace tensord
