// The tenants of a server, built from the config and replaced by reload().
// Lookup by token hash is constant-time in the token (every tenant is
// compared, with a constant-time comparison) so response timing does not
// reveal which hashes exist.
//
// Thread-safe. Lookups read an immutable snapshot (tokens, names, tenants)
// taken under a short lock, so they never see a half-applied reload. Tenant
// objects are never destroyed while the registry lives: a tenant removed by
// a reload is retired (its token stops working, it is no longer listed), but
// requests and jobs that already hold its Tenant& stay valid, and its stored
// tensors are kept so that adding it back restores them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/config.h"
#include "scheduler/tenant.h"

namespace tensord {

class TenantRegistry {
 public:
  explicit TenantRegistry(const ServerConfig& config);

  bool anonymous() const { return anonymous_; }
  // The active tenant whose token hashes to `token_sha256_hex`, or nullptr.
  Tenant* by_token_hash(const std::string& token_sha256_hex) const;
  // The active tenant called `name`, or nullptr.
  Tenant* by_name(const std::string& name) const;
  // The anonymous tenant (only when anonymous()).
  Tenant* default_tenant() const;
  // Active tenants, in config order.
  std::vector<Tenant*> all() const;
  // Every tenant this registry has held, active or retired (checkpoints).
  std::vector<Tenant*> all_with_retired() const;
  // Partition of every tenant ever held (a tenant keeps its partition).
  std::map<std::string, std::string> partitions_by_tenant() const;

  struct ReloadResult {
    std::vector<std::string> added;     // new names (on_new was called)
    std::vector<std::string> restored;  // retired tenants added back
    std::vector<std::string> removed;   // now retired
  };
  // Makes `next` the set of active tenants. `next` must be valid
  // (validate_config) and keep each known tenant on its partition; throws
  // Error(kBadRequest) otherwise, changing nothing. `on_new` runs for each
  // tenant created for the first time, before its token works (e.g. to
  // restore its checkpoint). Serialized with other reloads.
  ReloadResult reload(const ServerConfig& next, const std::function<void(Tenant&)>& on_new = {});
  // Moves on with every reload that applied: a lookup cached under an
  // earlier value may name a tenant since retired (or miss one since
  // added). Starts at 0.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  struct Snapshot {
    std::vector<Tenant*> tenants;     // active, config order
    std::vector<std::string> tokens;  // token_sha256 of tenants[i]
    std::map<std::string, Tenant*> by_name;
  };
  std::shared_ptr<const Snapshot> snapshot() const;

  const bool anonymous_;
  Tenant* default_ = nullptr;  // the anonymous tenant (a reload cannot change it)
  std::mutex reload_mu_;       // one reload at a time
  mutable std::mutex mu_;      // guards snap_ and known_
  std::shared_ptr<const Snapshot> snap_;
  std::map<std::string, std::unique_ptr<Tenant>> known_;  // never shrinks
  std::vector<Tenant*> known_order_;                      // creation order
  std::atomic<uint64_t> generation_{0};
};

// Constant-time equality for equal-length strings (false if lengths differ).
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace tensord
