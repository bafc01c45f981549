// Server configuration: partitions and tenants (API.md section 9). Parsed
// from JSON by api/config_json.cpp; validated here so every consumer sees a
// consistent config. No JSON here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tensord {

struct PartitionConfig {
  std::string name;
  double share = 1.0;       // fraction of the device (SMs on CUDA, cores on CPU)
  int workqueue_limit = 2;  // most jobs running at once
};

struct TenantConfig {
  std::string name;
  std::string token_sha256;  // lower-case hex; empty only for the anonymous tenant
  std::string partition;
  double weight = 1.0;
  int64_t memory_bytes = INT64_MAX;
  int max_queued = 64;
  int max_running = 4;
  bool admin = false;
};

struct ServerConfig {
  std::vector<PartitionConfig> partitions;
  std::vector<TenantConfig> tenants;
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
