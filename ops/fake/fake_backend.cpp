#include "ops/fake/fake_backend.h"

#include <cstdlib>
#include <cstring>

#include "ops/error.h"

namespace tensord {

std::vector<DeviceInfo> FakeBackend::devices() const {
  std::vector<DeviceInfo> out;
  out.reserve(static_cast<size_t>(num_devices_));
  for (int i = 0; i < num_devices_; ++i) {
    out.push_back(DeviceInfo{Device{DeviceType::kFake, static_cast<int16_t>(i)}, "fake", capacity_, 1});
  }
  return out;
}

void* FakeBackend::allocate(Device d, size_t bytes) {
  int64_t b = static_cast<int64_t>(bytes);
  int64_t cur = allocated_.load();
  do {
    if (b > capacity_ - cur) {
      throw Error(ErrorCode::kQuotaExceeded, "fake: device out of memory");
    }
  } while (!allocated_.compare_exchange_weak(cur, cur + b));
  void* p = std::malloc(bytes ? bytes : 1);
  if (!p) {
    allocated_ -= b;
    throw Error(ErrorCode::kQuotaExceeded, "fake: host out of memory");
  }
  return p;
}

void FakeBackend::deallocate(Device d, void* p, size_t bytes) noexcept {
  std::free(p);
  allocated_ -= static_cast<int64_t>(bytes);
}

void FakeBackend::copy_to_device(Device d, void* dst, const void* host_src, size_t bytes) {
  ++to_device_;
  if (t_bound_stream() != 0) ++bound_copies_;
  if (bytes) std::memcpy(dst, host_src, bytes);
}
void FakeBackend::copy_to_host(Device d, void* host_dst, const void* src, size_t bytes) {
  ++to_host_;
  if (t_bound_stream() != 0) ++bound_copies_;
  if (bytes) std::memcpy(host_dst, src, bytes);
}
void FakeBackend::copy_on_device(Stream s, void* dst, const void* src, size_t bytes) {
  if (bytes) std::memmove(dst, src, bytes);
}

Stream FakeBackend::create_stream(Device d) {
  ++live_streams_;
  return Stream{d, next_stream_.fetch_add(1)};
}
void FakeBackend::destroy_stream(Stream s) {
  --live_streams_;
}
Event FakeBackend::record_event(Stream s) {
  return Event{s.device, ++events_};
}

bool FakeBackend::supports_op(std::string_view op) const {
  std::lock_guard<std::mutex> lk(mu_);
  return supported_.count(op) > 0;
}
void FakeBackend::set_supported(std::set<std::string, std::less<>> ops) {
  std::lock_guard<std::mutex> lk(mu_);
  supported_ = std::move(ops);
}

}  // namespace tensord
