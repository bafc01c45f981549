// GET /v1/admin/tenants: live usage per tenant (never a token or its hash).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tensord {

struct TenantUsage {
  std::string name;
  std::string partition;
  double weight = 1.0;
  bool admin = false;
  int64_t memory_bytes = 0;
  int64_t memory_limit_bytes = 0;
  uint64_t stored_tensors = 0;
  int max_queued = 0;
  int max_running = 0;
};

// {"tenants": [{"name", "partition", "weight", "admin", "memory_bytes",
// "memory_limit_bytes", "stored_tensors", "max_queued", "max_running"}]}.
std::string tenants_to_json(const std::vector<TenantUsage>& tenants);

}  // namespace tensord
