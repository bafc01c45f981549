#include "ops/memory_account.h"

#include "ops/error.h"

namespace tensord {

void MemoryAccount::charge(int64_t bytes, bool enforce) {
  if (!enforce) {
    used_.fetch_add(bytes, std::memory_order_relaxed);
    return;
  }
  int64_t cur = used_.load(std::memory_order_relaxed);
  const int64_t lim = limit();
  do {
    if (bytes > lim - cur) {
      throw Error(ErrorCode::kQuotaExceeded, "tenant '" + name_ + "' memory quota exceeded: " + std::to_string(cur) +
                                                 " + " + std::to_string(bytes) + " bytes > limit " +
                                                 std::to_string(lim));
    }
  } while (!used_.compare_exchange_weak(cur, cur + bytes, std::memory_order_relaxed));
}

}  // namespace tensord
