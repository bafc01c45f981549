// Byte accounting against a limit (a tenant's memory_bytes quota).
// Thread-safe: charge/release are lock-free atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace tensord {

class MemoryAccount {
 public:
  explicit MemoryAccount(std::string name, int64_t limit_bytes = INT64_MAX)
      : name_(std::move(name)), limit_(limit_bytes) {}

  // Adds `bytes`; throws quota_exceeded (nothing charged) if over the limit.
  // enforce = false charges past the limit (a checkpoint restored after the
  // quota shrank): later charges fail until usage drops below it.
  void charge(int64_t bytes, bool enforce = true);
  void release(int64_t bytes) noexcept { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  int64_t used() const noexcept { return used_.load(std::memory_order_relaxed); }
  int64_t limit() const noexcept { return limit_.load(std::memory_order_relaxed); }
  void set_limit(int64_t l) noexcept { limit_.store(l, std::memory_order_relaxed); }
  const std::string& name() const noexcept { return name_; }

 private:
  std::string name_;
  std::atomic<int64_t> used_{0};
  std::atomic<int64_t> limit_;
};

}  // namespace tensord
