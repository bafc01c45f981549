// Server configuration: partitions and tenants (API.md section 9). Parsed
// from JSON by api/config_json.cpp; validated here so every consumer sees a
// consistent config. No JSON here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/scheduling_spec.h"

namespace tensord {

struct ServerConfig {
  std::vector<PartitionSpec> partitions;
  std::vector<TenantSpec> tenants;
  // True without --config: one anonymous tenant "default", no auth.
  bool anonymous = false;
};

// One partition "default" (share 1, the given limit) and the anonymous
// tenant "default" on it with no quota.
ServerConfig default_config(int workqueue_limit);

// Throws Error(kBadRequest) naming the first problem: no partitions, bad or
// duplicate names, share outside (0, 1] or shares summing over 1, limits < 1,
// unknown partition, weight <= 0, token not 64 hex digits or shared by two
// tenants, negative quotas.
void validate_config(const ServerConfig& c);

}  // namespace tensord
