// A tenant: its configuration, memory account and stored tensors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ops/memory_account.h"
#include "scheduler/config.h"
#include "scheduler/tensor_store.h"

namespace tensord {

struct Tenant {
  explicit Tenant(std::string n, int64_t memory_limit = INT64_MAX) : Tenant(make_config(std::move(n), memory_limit)) {}
  explicit Tenant(const TenantConfig& c)
      : config(c),
        name(c.name),
        partition(c.partition),
        account(std::make_shared<MemoryAccount>(c.name, c.memory_bytes)),
        store(account) {}

  TenantConfig config;
  std::string name;
  std::string partition;
  std::shared_ptr<MemoryAccount> account;
  TensorStore store;

 private:
  static TenantConfig make_config(std::string n, int64_t limit) {
    TenantConfig c;
    c.name = std::move(n);
    c.partition = "default";
    c.memory_bytes = limit;
    return c;
  }
};

}  // namespace tensord
