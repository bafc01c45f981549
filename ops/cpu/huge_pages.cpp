#include "ops/cpu/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace tensord {

void advise_huge_pages(void* p, size_t bytes) noexcept {
  if (p == nullptr || bytes < kHugePageAdviseBytes) return;
  constexpr size_t kHuge = size_t{2} << 20;
  // The first 2 MiB boundary inside the buffer, and the whole pages after it
  // (pointer arithmetic from p: no integer-to-pointer cast).
  const size_t lead = (kHuge - reinterpret_cast<uintptr_t>(p) % kHuge) % kHuge;
  if (bytes <= lead) return;
  const size_t span = (bytes - lead) / kHuge * kHuge;
  if (span == 0) return;
  // madvise needs page alignment, which 2 MiB boundaries have; a range
  // inside a malloc'd mapping splits its VMA, which munmap then frees whole.
  (void)madvise(static_cast<char*>(p) + lead, span, MADV_HUGEPAGE);
}

void release_pages(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  const auto page = static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
  const size_t lead = (page - reinterpret_cast<uintptr_t>(p) % page) % page;
  if (bytes <= lead) return;
  const size_t span = (bytes - lead) / page * page;
  if (span != 0) (void)madvise(static_cast<char*>(p) + lead, span, MADV_DONTNEED);
}

}  // namespace tensord
