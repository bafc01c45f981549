// Large request bodies' memory, kept for the next upload (the role the host
// block cache plays for tensors, ops/cpu/host_block_cache.h). A 256 MiB
// body read into fresh memory faults in 128 huge pages that the kernel
// zeroes first: 44% of a PUT's time went to clear_page_erms, and back-to-
// back PUTs took 0.17-0.19 s or 0.42-0.81 s depending on how fast the
// kernel found free huge pages (bench/README.md, "datapath"). A released
// body's string (a replaced or deleted stored tensor it backed, a JSON body
// once parsed) comes back here with its pages resident, and the next body of
// a similar size is read into it.
//
// Only strings of at least kMinBytes are kept, at most `capacity` bytes in
// all (oldest dropped first), and a body is served from a string at most
// twice its size, so a small body never pins a large string. Metric:
// tensord_body_pool_bytes (gauge, summed over pools). Thread-safe.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "api/http_types.h"

namespace tensord {

class BodyPool final : public BodyRecycler {
 public:
  static constexpr size_t kMinBytes = size_t{4} << 20;

  explicit BodyPool(size_t capacity);
  ~BodyPool() override;
  BodyPool(const BodyPool&) = delete;
  BodyPool& operator=(const BodyPool&) = delete;

  // 1/16 of physical memory, at most 2 GiB.
  static size_t default_capacity();

  // An empty string whose capacity holds `bytes`: a pooled one when one of
  // a fitting size is there, else a fresh one reserved (and advised huge
  // pages, ops/cpu/huge_pages.h).
  std::string take(size_t bytes);
  // A string of `bytes` characters with unspecified contents, for a reader
  // that writes all of them before anything reads them (a body read from
  // the socket): a pooled string keeps the size its last body gave it, so
  // only what lies past that is zero-filled (resize() of an emptied
  // string zero-filled all 256 MiB of a PUT: 4% of the server's time).
  std::string take_sized(size_t bytes);
  // Keeps `s` (its capacity, pages and size) for a later take(); drops it
  // when it is small.
  void recycle(std::string&& s) noexcept override;

  size_t cached_bytes() const;
  void trim();  // drops every pooled string

 private:
  std::string take_kept(size_t bytes);  // as recycled, or fresh and empty
  void drop_locked(size_t i);

  const size_t capacity_;
  mutable std::mutex mu_;
  std::vector<std::string> free_;  // oldest first
  size_t cached_ = 0;
};

}  // namespace tensord
