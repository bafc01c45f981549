#include "scheduler/collective_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/registry.h>

#include "metrics/metrics.h"

namespace tensord {

struct CollectiveMetrics::Impl {
  prometheus::Family<prometheus::Counter>* ops = nullptr;
  prometheus::Family<prometheus::Counter>* bytes = nullptr;
};

CollectiveMetrics::CollectiveMetrics(bool enabled) {
  if (!enabled) return;
  impl_ = std::make_unique<Impl>();
  auto& reg = metrics_registry();
  impl_->ops = &prometheus::BuildCounter()
                    .Name("tensord_collective_ops_total")
                    .Help("Collectives run, per group and op")
                    .Register(reg);
  impl_->bytes = &prometheus::BuildCounter()
                      .Name("tensord_collective_bytes_total")
                      .Help("Input bytes the ranks contributed to collectives, summed over ranks")
                      .Register(reg);
}

CollectiveMetrics::~CollectiveMetrics() = default;

void CollectiveMetrics::submitted(const std::string& group, dist::CollectiveOp op, size_t bytes, bool first_member) {
  if (!impl_) return;
  const std::string name(dist::collective_op_name(op));
  if (first_member) impl_->ops->Add({{"group", group}, {"op", name}}).Increment();
  impl_->bytes->Add({{"group", group}, {"op", name}}).Increment(static_cast<double>(bytes));
}

}  // namespace tensord
