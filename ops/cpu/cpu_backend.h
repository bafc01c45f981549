// The CPU backend: host memory, a worker pool with one thread per core, and
// streams that are ordered host executors (streams/host_stream.h): work on a
// stream runs in order on the thread that found it idle; events are stream
// positions; capture records host work for replay. Stream 0 is the default
// stream and always exists.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "ops/backend.h"
#include "ops/cpu/host_block_cache.h"
#include "ops/cpu/thread_pool.h"
#include "streams/host_stream.h"

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
  void destroy_stream(Stream s) override;
  Event record_event(Stream s) override;
  void wait_event(Stream s, Event e) override;
  void synchronize(Stream s) override;
  bool is_capturing(Stream s) const override;
  void launch_host_func(Stream s, std::function<void()> fn) override;
  void begin_capture(Stream s) override;
  std::shared_ptr<StreamGraph> end_capture(Stream s) override;
  void launch_graph(Stream s, const StreamGraph& g) override;

  bool supports_op(std::string_view op) const override;

  ThreadPool& pool() { return pool_; }
  // Bytes held in the large-block cache (freed, kept mapped for reuse).
  size_t cached_bytes() const { return cache_.cached_bytes(); }

 private:
  ThreadPool pool_;
  HostBlockCache cache_;
  std::atomic<int64_t> allocated_{0};
  std::shared_ptr<HostStream> stream(Stream s) const;  // not_found for unknown ids

  mutable std::mutex streams_mu_;
  std::unordered_map<int64_t, std::shared_ptr<HostStream>> streams_;
  int64_t next_stream_ = 1;
};

}  // namespace tensord
