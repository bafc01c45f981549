// The tenants of a server, built from the config. Lookup by token hash is
// constant-time in the token (every tenant is compared, with a constant-time
// comparison) so response timing does not reveal which hashes exist.
// Thread-safe after construction (tenants are never removed while serving).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/config.h"
#include "scheduler/tenant.h"

namespace tensord {

class TenantRegistry {
 public:
  explicit TenantRegistry(const ServerConfig& config);

  bool anonymous() const { return anonymous_; }
  // The tenant whose token hashes to `token_sha256_hex`, or nullptr.
  Tenant* by_token_hash(const std::string& token_sha256_hex) const;
  Tenant* by_name(const std::string& name) const;
  // The anonymous tenant (only when anonymous()).
  Tenant* default_tenant() const;
  std::vector<Tenant*> all() const;

 private:
  bool anonymous_;
  std::vector<std::unique_ptr<Tenant>> tenants_;
  std::map<std::string, Tenant*> by_name_;
};

// Constant-time equality for equal-length strings (false if lengths differ).
bool constant_time_equal(const std::string& a, const std::string& b);

}  // namespace tensord
