// Checkpoints of every tenant's stored tensors to the state dir (API.md
// 10): on POST /v1/checkpoint, on a timer (--checkpoint-every), at
// shutdown, and the restore at start. Writes of one tenant are serialized;
// a tenant whose store has not changed since its last checkpoint is not
// rewritten. Registers tensord_checkpoints_total{tenant, result} and
// tensord_checkpoint_last_success_timestamp_seconds{tenant}; logs each
// event. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "api/checkpoint.h"

namespace tensord {

struct Tenant;
class TenantRegistry;

class Checkpointer {
 public:
  // dir empty: checkpoints are off (write throws 503 unavailable).
  Checkpointer(std::string dir, TenantRegistry* tenants);
  ~Checkpointer();  // stop_timer()
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  bool enabled() const { return !dir_.empty(); }

  // One tenant's checkpoint (why: "request", "timer", "shutdown"); throws
  // Error on failure, after counting and logging it.
  CheckpointInfo write(const Tenant& tenant, std::string_view why);
  // Every tenant, retired ones included, skipping unchanged ones; failures
  // are counted and logged, not thrown. Returns how many failed.
  int write_all(std::string_view why);
  // Restores one tenant (start, or a tenant a reload added); logs a
  // skipped (corrupt) file or a restore past the quota.
  void restore(Tenant& tenant);

  // Writes every `every` (0: no timer) on a thread of its own.
  void start_timer(std::chrono::seconds every);
  void stop_timer();

 private:
  std::mutex& lock_of(const std::string& tenant);

  const std::string dir_;
  TenantRegistry* const tenants_;
  std::mutex mu_;                                             // guards the maps
  std::map<std::string, std::unique_ptr<std::mutex>> locks_;  // one writer per tenant
  std::map<std::string, uint64_t> written_;                   // store version on disk, per tenant
  std::mutex timer_mu_;
  std::condition_variable timer_cv_;
  bool timer_stop_ = false;
  std::thread timer_;
};

}  // namespace tensord
