// A tenant's namespace of stored tensors. Stored tensors are immutable
// values: a write replaces the entry, so a running program's snapshot stays
// valid. Every stored byte is charged to the tenant's MemoryAccount.
// Thread-safe (one mutex per tenant; never held while computing).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ops/memory_account.h"
#include "ops/tensor.h"

namespace tensord {

struct StoredInfo {
  std::string name;
  TensorMeta meta;
  int64_t bytes = 0;
};

class TensorStore {
 public:
  explicit TensorStore(std::shared_ptr<MemoryAccount> account) : account_(std::move(account)) {}

  std::optional<Tensor> get(const std::string& name) const;
  // Stores `t` (charging its bytes; quota_exceeded leaves the old value).
  // Returns true when the name is new.
  bool put(const std::string& name, Tensor t);
  bool erase(const std::string& name);
  std::vector<StoredInfo> list(const std::string& prefix) const;
  // All-or-nothing: every write is charged before any is applied.
  // enforce_quota = false (restoring a checkpoint): charged past the quota,
  // so a tenant whose quota shrank since keeps its state.
  void commit(std::vector<std::pair<std::string, Tensor>> writes, bool enforce_quota = true);
  // The same values in other memory (a job's copy of a stored tensor on its
  // device): replaces `name` with `to` if `name` still holds `from`'s bytes,
  // and returns whether it did. Not a change of value: the version stays.
  bool relocate(const std::string& name, const Tensor& from, Tensor to);
  // Snapshot of everything (checkpoints).
  std::vector<std::pair<std::string, Tensor>> snapshot() const;
  // Snapshot with the store's version: it changes on every put, erase and
  // commit, so a checkpoint of an unchanged store can be skipped.
  std::vector<std::pair<std::string, Tensor>> snapshot(uint64_t& version) const;
  uint64_t version() const;

  const std::shared_ptr<MemoryAccount>& account() const { return account_; }

 private:
  // A tensor that owns exactly its bytes, charged to this tenant.
  Tensor owned(Tensor t, bool enforce_quota = true) const;

  std::shared_ptr<MemoryAccount> account_;
  mutable std::mutex mu_;
  std::map<std::string, Tensor> tensors_;
  uint64_t version_ = 0;  // under mu_
};

// Validates a tensor name: [A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*, at most 256
// bytes, no "." or ".." segments. Throws bad_request.
void validate_tensor_name(const std::string& name);

}  // namespace tensord
