// A CPU backend that counts allocations (replay-plan tests: a replay must
// not allocate). Answers to the name "cpu" so the CPU kernels run on it.
#pragma once

#include <atomic>

#include "ops/cpu/cpu_backend.h"

namespace tensord::testing_util {

class CountingBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  std::vector<DeviceInfo> devices() const override { return cpu_.devices(); }
  std::map<std::string, std::string> libraries() const override { return cpu_.libraries(); }
  void* allocate(Device d, size_t bytes) override {
    allocations.fetch_add(1);
    return cpu_.allocate(d, bytes);
  }
  void deallocate(Device d, void* p, size_t bytes) noexcept override { cpu_.deallocate(d, p, bytes); }
  int64_t allocated_bytes(Device d) const override { return cpu_.allocated_bytes(d); }
  void copy_to_device(Device d, void* dst, const void* src, size_t n) override { cpu_.copy_to_device(d, dst, src, n); }
  void copy_to_host(Device d, void* dst, const void* src, size_t n) override { cpu_.copy_to_host(d, dst, src, n); }
  void copy_on_device(Stream s, void* dst, const void* src, size_t n) override { cpu_.copy_on_device(s, dst, src, n); }
  Stream create_stream(Device d) override { return cpu_.create_stream(d); }
  void destroy_stream(Stream s) override { cpu_.destroy_stream(s); }
  Event record_event(Stream s) override { return cpu_.record_event(s); }
  void wait_event(Stream s, Event e) override { cpu_.wait_event(s, e); }
  void synchronize(Stream s) override { cpu_.synchronize(s); }
  bool is_capturing(Stream s) const override { return cpu_.is_capturing(s); }
  bool supports_op(std::string_view op) const override { return cpu_.supports_op(op); }
  ThreadPool& pool() { return cpu_.pool(); }

  std::atomic<int64_t> allocations{0};

 private:
  CpuBackend cpu_{2};
};

}  // namespace tensord::testing_util
