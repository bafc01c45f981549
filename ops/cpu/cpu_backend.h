// The CPU backend: host memory, a worker pool with one thread per core, and
// streams that are ordered host executors (work runs synchronously on the
// caller, so record/wait/synchronize are trivially satisfied).
#pragma once

#include <atomic>
#include <memory>

#include "ops/backend.h"
#include "ops/cpu/host_block_cache.h"
#include "ops/cpu/thread_pool.h"

namespace tensord {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads = 0);

  std::string_view name() const override { return "cpu"; }
  std::vector<DeviceInfo> devices() const override;
  std::map<std::string, std::string> libraries() const override;

  void* allocate(Device d, size_t bytes) override;
  void deallocate(Device d, void* p, size_t bytes) noexcept override;
  int64_t allocated_bytes(Device d) const override { return allocated_.load(std::memory_order_relaxed); }

  void copy_to_device(Device d, void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(Device d, void* host_dst, const void* src, size_t bytes) override;
  void copy_on_device(Stream s, void* dst, const void* src, size_t bytes) override;

  Stream create_stream(Device d) override;
  void destroy_stream(Stream s) override {}
  Event record_event(Stream s) override { return Event{s.device, 0}; }
  void wait_event(Stream s, Event e) override {}
  void synchronize(Stream s) override {}
  bool is_capturing(Stream s) const override { return false; }

  bool supports_op(std::string_view op) const override;

  ThreadPool& pool() { return pool_; }
  // Bytes held in the large-block cache (freed, kept mapped for reuse).
  size_t cached_bytes() const { return cache_.cached_bytes(); }

 private:
  ThreadPool pool_;
  HostBlockCache cache_;
  std::atomic<int64_t> allocated_{0};
  std::atomic<int64_t> next_stream_{1};
};

}  // namespace tensord
