// A cache of large host blocks for the CPU backend (the role of PyTorch's
// caching allocator on CUDA). Fresh multi-megabyte buffers from the kernel
// are zero pages that fault in on first touch, which costs more than the
// memory-bound op writing them (an optimizer step over 16M floats spent most
// of its time in page faults); a freed block of the same size class is
// reused already mapped. Blocks >= kMinBytes are rounded up to a multiple of
// kGranule so near sizes share a class. At most `capacity` bytes are held;
// beyond that blocks go back to the system. Thread-safe (one mutex; taken
// only for large allocations, which are rare next to the work they feed).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

namespace tensord {

class HostBlockCache {
 public:
  static constexpr size_t kMinBytes = size_t{1} << 20;  // smaller: plain aligned_alloc
  static constexpr size_t kGranule = size_t{2} << 20;

  explicit HostBlockCache(size_t capacity) : capacity_(capacity) {}
  ~HostBlockCache();
  HostBlockCache(const HostBlockCache&) = delete;
  HostBlockCache& operator=(const HostBlockCache&) = delete;

  // The size class a request of `bytes` is served from (0 when uncached).
  static size_t size_class(size_t bytes);

  // A 64-byte-aligned block of at least `bytes`; nullptr only if the system
  // is out of memory.
  void* allocate(size_t bytes);
  // Returns a block from allocate(bytes) (same `bytes`).
  void deallocate(void* p, size_t bytes) noexcept;

  size_t cached_bytes() const;
  void trim();  // frees every cached block

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // size class -> blocks
  size_t cached_ = 0;
};

}  // namespace tensord
