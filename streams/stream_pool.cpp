#include "streams/stream_pool.h"

#include <algorithm>

#include "ops/backend.h"
#include "ops/error.h"

namespace tensord {

StreamPool::StreamPool(Backend& backend, Device device, int size, int partition) : backend_(backend) {
  if (size < 1) throw Error(ErrorCode::kInvalidArgument, "a stream pool needs at least one stream");
  streams_.reserve(static_cast<size_t>(size));
  try {
    for (int i = 0; i < size; ++i) {
      streams_.push_back(partition >= 0 ? backend_.create_partition_stream(device, partition)
                                        : backend_.create_stream(device));
    }
  } catch (...) {
    for (Stream s : streams_) backend_.destroy_stream(s);
    throw;
  }
}

StreamPool::~StreamPool() {
  for (Stream s : streams_) backend_.destroy_stream(s);
}

Stream StreamPool::acquire() {
  uint64_t i = next_.fetch_add(1, std::memory_order_relaxed);
  return streams_[i % streams_.size()];
}

int StreamPool::index_of(Stream s) const {
  auto it = std::find(streams_.begin(), streams_.end(), s);
  return it == streams_.end() ? -1 : static_cast<int>(it - streams_.begin());
}

}  // namespace tensord
