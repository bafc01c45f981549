// A tenant: its configuration, memory account and stored tensors.
// `name` and `partition` never change; the rest of the configuration can be
// replaced by a config reload (TenantRegistry::reload), so it is read
// through config(), a snapshot taken under the tenant's lock. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "ops/memory_account.h"
#include "scheduler/config.h"
#include "scheduler/tensor_store.h"

namespace tensord {

struct Tenant {
  explicit Tenant(std::string n, int64_t memory_limit = INT64_MAX) : Tenant(make_config(std::move(n), memory_limit)) {}
  explicit Tenant(const TenantSpec& c)
      : name(c.name),
        partition(c.partition),
        account(std::make_shared<MemoryAccount>(c.name, c.memory_bytes)),
        store(account),
        config_(c) {}
  Tenant(const Tenant&) = delete;
  Tenant& operator=(const Tenant&) = delete;

  const std::string name;
  const std::string partition;
  std::shared_ptr<MemoryAccount> account;
  TensorStore store;

  // The tenant's current configuration (a copy).
  TenantSpec config() const {
    std::lock_guard<std::mutex> lk(mu_);
    return config_;
  }
  bool admin() const {
    std::lock_guard<std::mutex> lk(mu_);
    return config_.admin;
  }
  // A reload's new settings: token, weight, quotas, admin. The name and the
  // partition are kept (the caller checked they did not change); the memory
  // limit applies to the next charge (bytes already held are not freed).
  void reconfigure(const TenantSpec& c) {
    std::lock_guard<std::mutex> lk(mu_);
    config_ = c;
    config_.name = name;
    config_.partition = partition;
    account->set_limit(c.memory_bytes);
  }

 private:
  static TenantSpec make_config(std::string n, int64_t limit) {
    TenantSpec c;
    c.name = std::move(n);
    c.partition = "default";
    c.memory_bytes = limit;
    return c;
  }

  mutable std::mutex mu_;
  TenantSpec config_;
};

}  // namespace tensord
