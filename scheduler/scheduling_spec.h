// The scheduler's configuration values (API.md section 9): partitions
// (ops/partition_spec.h, the one partition type) and the tenants queued on
// them (TenantSpec, the one tenant type: the config file's tenant entry,
// what the scheduler queues by and what a Tenant holds). Plain values.
#pragma once

#include <cstdint>
#include <string>

#include "ops/partition_spec.h"

namespace tensord {

struct TenantSpec {
  std::string name;
  std::string partition;
  double weight = 1.0;               // weighted fair queueing across the partition's tenants
  int max_queued = 64;               // waiting jobs; one more is 429 queue_full
  int max_running = 4;               // jobs of this tenant running at once
  int64_t memory_bytes = INT64_MAX;  // tensors, graphs and job memory held at once
  std::string token_sha256{};        // lower-case hex; empty only for the anonymous tenant
  bool admin = false;
};

}  // namespace tensord
