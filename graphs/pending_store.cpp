#include "graphs/pending_store.h"

namespace tensord {

std::optional<Tensor> PendingStore::read(const std::string& name) const {
  for (auto it = writes_.rbegin(); it != writes_.rend(); ++it) {
    if (it->first == name) return it->second;
  }
  return stored_read_ ? stored_read_(name) : std::nullopt;
}

void PendingStore::write(const std::string& name, Tensor t) {
  if (keep_) t = keep_(std::move(t));
  for (auto& w : writes_) {
    if (w.first == name) {
      w.second = std::move(t);
      return;
    }
  }
  writes_.emplace_back(name, std::move(t));
}

}  // namespace tensord
