// A partition's streams (c10's getStreamFromPool): `size` streams created
// on one device through the backend when the partition starts, handed out
// round robin, destroyed with the pool. Jobs of a partition take one each,
// so their work is ordered within a job and independent across jobs (and
// the trace draws a lane per stream). Thread-safe.
#pragma once

#include <atomic>
#include <vector>

#include "ops/device.h"
#include "streams/stream.h"

namespace tensord {

class Backend;

class StreamPool {
 public:
  // partition >= 0: the streams run in that partition of the device
  // (Backend::create_partition_stream); -1: plain streams.
  StreamPool(Backend& backend, Device device, int size, int partition = -1);
  ~StreamPool();
  StreamPool(const StreamPool&) = delete;
  StreamPool& operator=(const StreamPool&) = delete;

  Stream acquire();
  // The index of `s` in the pool (its lane), or -1.
  int index_of(Stream s) const;
  int size() const { return static_cast<int>(streams_.size()); }
  const std::vector<Stream>& streams() const { return streams_; }

 private:
  Backend& backend_;
  std::vector<Stream> streams_;
  std::atomic<uint64_t> next_{0};
};

}  // namespace tensord
