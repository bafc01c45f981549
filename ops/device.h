// Device: a small value {type, index}, as c10::Device.
#pragma once

#include <cstdint>
#include <string>

namespace tensord {

enum class DeviceType : uint8_t { kCPU, kCUDA, kFake };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int16_t index = 0;

  friend bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
  std::string str() const {
    const char* t = type == DeviceType::kCPU ? "cpu" : type == DeviceType::kCUDA ? "cuda" : "fake";
    return std::string(t) + ":" + std::to_string(index);
  }
};

}  // namespace tensord
