// A fake backend for scheduler, stream and graph tests (c10's FakeGuardImpl):
// host memory with exact accounting and an optional byte capacity, streams
// and events that only count, and no kernels (supports_op is a set the test
// controls). No timing, no hardware.
#pragma once

#include <atomic>
#include <mutex>
#include <set>
#include <string>

#include "ops/backend.h"

namespace tensord {

class FakeBackend final : public Backend {
 public:
  explicit FakeBackend(int devices = 1, int64_t capacity_bytes = INT64_MAX)
      : num_devices_(devices), capacity_(capacity_bytes) {}

  std::string_view name() const override { return "fake"; }
  std::vector<DeviceInfo> devices() const override;
  std::map<std::string, std::string> libraries() const override { return {{"fake", "1"}}; }

  void* allocate(Device d, size_t bytes) override;
  void deallocate(Device d, void* p, size_t bytes) noexcept override;
  int64_t allocated_bytes(Device d) const override { return allocated_.load(); }

  void copy_to_device(Device d, void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(Device d, void* host_dst, const void* src, size_t bytes) override;
  void copy_on_device(Stream s, void* dst, const void* src, size_t bytes) override;

  Stream create_stream(Device d) override;
  void destroy_stream(Stream s) override;
  Event record_event(Stream s) override;
  void wait_event(Stream s, Event e) override { ++waits_; }
  void synchronize(Stream s) override { ++syncs_; }
  bool is_capturing(Stream s) const override { return false; }
  // Counts bindings; copies made while bound are counted per binding too.
  void bind_thread_stream(Stream s) override {
    ++binds_;
    t_bound_stream() = s.id;
  }
  void unbind_thread_stream() override {
    ++unbinds_;
    t_bound_stream() = 0;
  }
  int64_t binds() const { return binds_.load(); }
  int64_t unbinds() const { return unbinds_.load(); }
  // The stream id bound to the calling thread (0: none).
  static int64_t& t_bound_stream() {
    thread_local int64_t id = 0;
    return id;
  }
  // Host copies made while the copying thread had a stream bound.
  int64_t bound_copies() const { return bound_copies_.load(); }

  bool supports_op(std::string_view op) const override;
  void set_supported(std::set<std::string, std::less<>> ops);

  int64_t live_streams() const { return live_streams_.load(); }
  int64_t events_recorded() const { return events_.load(); }
  // Host-to-device and device-to-host copies so far (placement tests).
  int64_t copies_to_device() const { return to_device_.load(); }
  int64_t copies_to_host() const { return to_host_.load(); }

 private:
  int num_devices_;
  int64_t capacity_;
  std::atomic<int64_t> allocated_{0};
  std::atomic<int64_t> next_stream_{1};
  std::atomic<int64_t> live_streams_{0};
  std::atomic<int64_t> events_{0};
  std::atomic<int64_t> waits_{0};
  std::atomic<int64_t> syncs_{0};
  std::atomic<int64_t> to_device_{0};
  std::atomic<int64_t> to_host_{0};
  std::atomic<int64_t> binds_{0};
  std::atomic<int64_t> unbinds_{0};
  std::atomic<int64_t> bound_copies_{0};
  mutable std::mutex mu_;
  std::set<std::string, std::less<>> supported_;
};

}  // namespace tensord
