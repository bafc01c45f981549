// advise_huge_pages (ops/cpu/huge_pages.h): the whole 2 MiB pages inside a
// large buffer are marked for transparent huge pages (the mapping's VmFlags
// gain "hg" in /proc/self/smaps); small buffers and null are left alone.
#include "ops/cpu/huge_pages.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace tensord {
namespace {

// The VmFlags line of the mapping that holds address `a`; empty if none.
std::string vm_flags_of(const void* a) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  const auto addr = reinterpret_cast<uintptr_t>(a);
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = addr >= lo && addr < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

bool thp_never() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return s.empty() || s.find("[never]") != std::string::npos;
}

TEST(HugePages, LargeBuffersAreAdvisedAndStayUsable) {
  if (thp_never()) GTEST_SKIP() << "transparent huge pages are off on this kernel (enabled: never)";
  const size_t bytes = size_t{16} << 20;
  char* p = static_cast<char*>(std::aligned_alloc(64, bytes));
  ASSERT_NE(p, nullptr);
  advise_huge_pages(p, bytes);
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t inner = (begin + (uintptr_t{2} << 20) - 1) & ~((uintptr_t{2} << 20) - 1);
  EXPECT_NE(vm_flags_of(reinterpret_cast<void*>(inner)).find(" hg"), std::string::npos)
      << vm_flags_of(reinterpret_cast<void*>(inner));
  std::memset(p, 0x5a, bytes);
  EXPECT_EQ(p[0], 0x5a);
  EXPECT_EQ(p[bytes - 1], 0x5a);
  std::free(p);
}

TEST(HugePages, SmallBuffersAndNullAreLeftAlone) {
  // A mapping of its own: a heap block could sit in a mapping that an
  // earlier large buffer's advice already marked (the check then fails
  // for a reason that is not this call's).
  const size_t bytes = kHugePageAdviseBytes - 64;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  char* p = static_cast<char*>(m);
  advise_huge_pages(p, bytes);
  EXPECT_EQ(vm_flags_of(p).find(" hg"), std::string::npos) << vm_flags_of(p);
  advise_huge_pages(nullptr, size_t{64} << 20);  // no effect, no crash
  munmap(m, bytes);
}

}  // namespace
}  // namespace tensord
