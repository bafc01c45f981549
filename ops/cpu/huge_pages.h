// Transparent huge pages for large host buffers. A buffer's first touch
// costs one page fault per 4 KiB page: 65k faults for a 256 MiB upload,
// which took 40% of the server's CPU time for a PUT and made it 2x the
// wire's time (bench/README.md, "datapath"). Advised with MADV_HUGEPAGE, the
// same buffer faults in 2 MiB at a time. The kernel decides: with
// /sys/kernel/mm/transparent_hugepage/enabled at "never" this does nothing,
// and "madvise" (Debian's default) or "always" honour it.
#pragma once

#include <cstddef>

namespace tensord {

// Buffers at least this large are advised (smaller ones hold no whole
// aligned 2 MiB page worth the call).
inline constexpr size_t kHugePageAdviseBytes = size_t{4} << 20;

// Asks for huge pages over the whole 2 MiB pages inside [p, p + bytes),
// before the buffer is first written. Does nothing below
// kHugePageAdviseBytes; failures are ignored (an advice, not a need).
void advise_huge_pages(void* p, size_t bytes) noexcept;

// Gives the whole pages inside [p, p + bytes) back to the system
// (MADV_DONTNEED): a buffer's part that will not be read again, such as a
// request body's base64 text once decoded in place. They read as zeros if
// touched again. Failures are ignored.
void release_pages(void* p, size_t bytes) noexcept;

}  // namespace tensord
