#include "ops/cpu/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace tensord {

void advise_huge_pages(void* p, size_t bytes) noexcept {
  if (p == nullptr || bytes < kHugePageAdviseBytes) return;
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t last = (begin + bytes) & ~(kHuge - 1);
  if (last <= first) return;
  // madvise needs page alignment, which 2 MiB boundaries have; a range
  // inside a malloc'd mapping splits its VMA, which munmap then frees whole.
  (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

}  // namespace tensord
