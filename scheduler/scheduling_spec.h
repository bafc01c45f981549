// Configuration of the scheduler (API.md section 9): partitions and the
// tenants queued on them. Plain values; the server fills them from --config.
#pragma once

#include <string>

namespace tensord {

struct PartitionSpec {
  std::string name;
  double share = 1.0;       // fraction of the compute (CPU cores / SMs)
  int workqueue_limit = 1;  // the most jobs the partition runs at once
};

struct TenantSpec {
  std::string name;
  std::string partition;
  double weight = 1;    // weighted fair queueing across the partition's tenants
  int max_queued = 64;  // waiting jobs; one more is 429 queue_full
  int max_running = 4;  // jobs of this tenant running at once
};

}  // namespace tensord
