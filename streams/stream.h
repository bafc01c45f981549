// Stream and Event: small values {device, id}, as c10::Stream. The backend
// that created them gives them meaning; raw cudaStream_t stays in ops/cuda.
#pragma once

#include <cstdint>

#include "ops/device.h"

namespace tensord {

struct Stream {
  Device device;
  int64_t id = 0;  // 0 is the device's default stream
  friend bool operator==(Stream a, Stream b) { return a.device == b.device && a.id == b.id; }
};

struct Event {
  Device device;
  int64_t id = 0;        // the backend's event (CUDA) or the stream it was recorded on (CPU)
  int64_t position = 0;  // CPU: tasks enqueued on that stream when recorded
};

}  // namespace tensord
