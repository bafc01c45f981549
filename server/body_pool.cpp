#include "server/body_pool.h"

#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "metrics/metrics.h"
#include "ops/cpu/huge_pages.h"

namespace tensord {

namespace {
prometheus::Gauge& pooled_gauge() {
  static prometheus::Gauge& g = prometheus::BuildGauge()
                                    .Name("tensord_body_pool_bytes")
                                    .Help("Bytes of released request-body memory kept resident for the next upload")
                                    .Register(metrics_registry())
                                    .Add({});
  return g;
}
}  // namespace

BodyPool::BodyPool(size_t capacity) : capacity_(capacity) {
  pooled_gauge();
}

BodyPool::~BodyPool() {
  trim();
}

size_t BodyPool::default_capacity() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGE_SIZE);
  size_t phys = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : (size_t{1} << 32);
  return std::min(phys / 16, size_t{2} << 30);
}

std::string BodyPool::take(size_t bytes) {
  std::string s = take_kept(bytes);
  s.clear();
  return s;
}

std::string BodyPool::take_sized(size_t bytes) {
  std::string s = take_kept(bytes);
  s.resize(bytes);  // a pooled string's old size: no fill below it
  return s;
}

std::string BodyPool::take_kept(size_t bytes) {
  std::string s;
  if (bytes >= kMinBytes) {
    std::lock_guard lock(mu_);
    // The smallest pooled string that holds `bytes` and is at most twice it.
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i) {
      size_t cap = free_[i].capacity();
      if (cap >= bytes && cap / 2 <= bytes && (best == free_.size() || cap < free_[best].capacity())) best = i;
    }
    if (best != free_.size()) {
      s = std::move(free_[best]);
      free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
      cached_ -= s.capacity();
      pooled_gauge().Decrement(static_cast<double>(s.capacity()));
      return s;
    }
  }
  s.reserve(bytes);
  if (bytes >= kHugePageAdviseBytes) advise_huge_pages(s.data(), s.capacity());
  return s;
}

void BodyPool::recycle(std::string&& s) noexcept {
  const size_t cap = s.capacity();
  if (cap < kMinBytes || cap > capacity_) return;  // freed with `s`
  std::string keep = std::move(s);                 // its size too (take_sized)
  std::lock_guard lock(mu_);
  while (!free_.empty() && cached_ + cap > capacity_) drop_locked(0);
  cached_ += cap;
  pooled_gauge().Increment(static_cast<double>(cap));
  try {
    free_.push_back(std::move(keep));
  } catch (...) {  // no memory for the vector's growth: free it instead
    cached_ -= cap;
    pooled_gauge().Decrement(static_cast<double>(cap));
  }
}

void BodyPool::drop_locked(size_t i) {
  const size_t cap = free_[i].capacity();
  free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
  cached_ -= cap;
  pooled_gauge().Decrement(static_cast<double>(cap));
}

size_t BodyPool::cached_bytes() const {
  std::lock_guard lock(mu_);
  return cached_;
}

void BodyPool::trim() {
  std::lock_guard lock(mu_);
  while (!free_.empty()) drop_locked(free_.size() - 1);
}

}  // namespace tensord
