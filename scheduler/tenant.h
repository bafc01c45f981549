// A tenant: its name, memory account and stored tensors. The foundation has
// one anonymous tenant, "default"; the tenancy issue adds config and auth.
#pragma once

#include <memory>
#include <string>

#include "ops/memory_account.h"
#include "scheduler/tensor_store.h"

namespace tensord {

struct Tenant {
  explicit Tenant(std::string n, int64_t memory_limit = INT64_MAX)
      : name(std::move(n)), account(std::make_shared<MemoryAccount>(name, memory_limit)), store(account) {}

  std::string name;
  std::string partition = "default";
  std::shared_ptr<MemoryAccount> account;
  TensorStore store;
};

}  // namespace tensord
