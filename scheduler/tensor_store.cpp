#include "scheduler/tensor_store.h"

#include "ops/error.h"

namespace tensord {

void validate_tensor_name(const std::string& name) {
  auto bad = [&](const std::string& why) {
    std::string shown = name.size() > 64 ? name.substr(0, 64) + "..." : name;
    throw Error(ErrorCode::kBadRequest, "invalid tensor name '" + shown + "': " + why);
  };
  if (name.empty()) bad("empty");
  if (name.size() > 256) bad("longer than 256 bytes");
  size_t seg_start = 0;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '/') {
      std::string seg = name.substr(seg_start, i - seg_start);
      if (seg.empty()) bad("empty path segment");
      if (seg == "." || seg == "..") bad("'.' and '..' segments are not allowed");
      seg_start = i + 1;
      continue;
    }
    char c = name[i];
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) bad("only [A-Za-z0-9_.-] and '/' are allowed");
  }
}

Tensor TensorStore::owned(Tensor t, bool enforce_quota) const {
  const auto& st = t.storage();
  // Charge per allocation: a buffer already charged to this tenant is not
  // charged again (one allocation, however many names); one charged to
  // someone else, or a view into a larger buffer (a zero-copy request body),
  // is copied so the tenant holds exactly its own bytes.
  bool exclusive = st && !st->borrowed() && (!st->account() || st->account() == account_) && st->nbytes() == t.nbytes();
  // A PUT's body holding just this tensor (and its small header) is kept
  // as it is: no second copy of a large upload. The header's bytes (at most
  // kMaxViewSlack) go uncharged.
  constexpr size_t kMaxViewSlack = 64 << 10;
  if (st && st->sole_view(kMaxViewSlack) && !st->account() && st->nbytes() == t.nbytes()) exclusive = true;
  if (!exclusive) t = t.clone();
  t.set_wrapped_number(false);
  t.storage()->charge(account_, enforce_quota);
  return t;
}

std::optional<Tensor> TensorStore::get(const std::string& name) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return std::nullopt;
  return it->second;
}

bool TensorStore::put(const std::string& name, Tensor t) {
  Tensor o = owned(std::move(t));
  std::lock_guard<std::mutex> lk(mu_);
  auto [it, inserted] = tensors_.insert_or_assign(name, std::move(o));
  ++version_;
  return inserted;
}

bool TensorStore::erase(const std::string& name) {
  Tensor old;
  std::lock_guard<std::mutex> lk(mu_);
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return false;
  old = std::move(it->second);
  tensors_.erase(it);
  ++version_;
  return true;
}

std::vector<StoredInfo> TensorStore::list(const std::string& prefix) const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<StoredInfo> out;
  for (auto it = tensors_.lower_bound(prefix); it != tensors_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
       ++it) {
    out.push_back(StoredInfo{it->first, it->second.meta(), static_cast<int64_t>(it->second.nbytes())});
  }
  return out;
}

void TensorStore::commit(std::vector<std::pair<std::string, Tensor>> writes, bool enforce_quota) {
  // Charge everything first; an exception drops the new tensors, which
  // releases whatever was charged, and leaves the map untouched.
  for (auto& w : writes) w.second = owned(std::move(w.second), enforce_quota);
  std::vector<Tensor> old;
  std::lock_guard<std::mutex> lk(mu_);
  if (!writes.empty()) ++version_;
  for (auto& [name, t] : writes) {
    auto it = tensors_.find(name);
    if (it != tensors_.end()) {
      old.push_back(std::move(it->second));
      it->second = std::move(t);
    } else {
      tensors_.emplace(name, std::move(t));
    }
  }
}

bool TensorStore::relocate(const std::string& name, const Tensor& from, Tensor to) {
  if (from.meta().str() != to.meta().str()) return false;
  Tensor o = owned(std::move(to), /*enforce_quota=*/false);  // charged already, as the job's copy
  Tensor old;
  std::lock_guard<std::mutex> lk(mu_);
  auto it = tensors_.find(name);
  if (it == tensors_.end() || it->second.storage() != from.storage() || it->second.data() != from.data()) return false;
  old = std::move(it->second);
  it->second = std::move(o);
  return true;
}

std::vector<std::pair<std::string, Tensor>> TensorStore::snapshot() const {
  std::lock_guard<std::mutex> lk(mu_);
  return {tensors_.begin(), tensors_.end()};
}

std::vector<std::pair<std::string, Tensor>> TensorStore::snapshot(uint64_t& version) const {
  std::lock_guard<std::mutex> lk(mu_);
  version = version_;
  return {tensors_.begin(), tensors_.end()};
}

uint64_t TensorStore::version() const {
  std::lock_guard<std::mutex> lk(mu_);
  return version_;
}

}  // namespace tensord
