#include "ops/cpu/host_block_cache.h"

#include <cstdlib>

#include "ops/cpu/huge_pages.h"

namespace tensord {

namespace {
void* raw_alloc(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  advise_huge_pages(p, rounded);  // first touch faults 2 MiB at a time (ops/cpu/huge_pages.h)
  return p;
}
}  // namespace

HostBlockCache::~HostBlockCache() {
  trim();
}

size_t HostBlockCache::size_class(size_t bytes) {
  if (bytes < kMinBytes) return 0;
  return (bytes + kGranule - 1) / kGranule * kGranule;
}

void* HostBlockCache::allocate(size_t bytes) {
  const size_t cls = size_class(bytes);
  if (cls == 0) return raw_alloc(bytes);
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_ -= cls;
      return p;
    }
  }
  return raw_alloc(cls);
}

void HostBlockCache::deallocate(void* p, size_t bytes) noexcept {
  const size_t cls = size_class(bytes);
  if (cls != 0) {
    std::lock_guard<std::mutex> lk(mu_);
    if (cached_ + cls <= capacity_) {
      try {
        free_[cls].push_back(p);
        cached_ += cls;
        return;
      } catch (...) {
        // fall through: free it
      }
    }
  }
  std::free(p);
}

size_t HostBlockCache::cached_bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return cached_;
}

void HostBlockCache::trim() {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& [cls, blocks] : free_) {
    for (void* p : blocks) std::free(p);
  }
  free_.clear();
  cached_ = 0;
}

}  // namespace tensord
