#include "ops/dist/abortable_store.h"

#include <gloo/common/error.h>

#include <algorithm>
#include <utility>

namespace tensord::dist {

namespace chr = std::chrono;

AbortableStore::AbortableStore(std::shared_ptr<gloo::rendezvous::Store> inner,
                               std::shared_ptr<const std::atomic<bool>> abort, chr::milliseconds slice)
    : inner_(std::move(inner)), abort_(std::move(abort)), slice_(std::max(slice, chr::milliseconds(1))) {}

void AbortableStore::set(const std::string& key, const std::vector<char>& data) {
  inner_->set(key, data);
}

std::vector<char> AbortableStore::get(const std::string& key) {
  return inner_->get(key);
}

void AbortableStore::wait(const std::vector<std::string>& keys) {
  wait(keys, kDefaultTimeout);
}

void AbortableStore::wait(const std::vector<std::string>& keys, const chr::milliseconds& timeout) {
  const auto deadline = chr::steady_clock::now() + timeout;
  for (;;) {
    if (abort_ && abort_->load()) throw gloo::IoException("the wait for the store's keys was aborted");
    const auto left = chr::duration_cast<chr::milliseconds>(deadline - chr::steady_clock::now());
    try {
      inner_->wait(keys, std::clamp(left, chr::milliseconds(1), slice_));
      return;
    } catch (const gloo::IoException&) {
      if (chr::steady_clock::now() >= deadline) throw;
    }
  }
}

}  // namespace tensord::dist
