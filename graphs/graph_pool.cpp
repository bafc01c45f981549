#include "graphs/graph_pool.h"

#include <algorithm>
#include <numeric>

namespace tensord {

std::vector<Tensor> GraphPool::bind(const std::vector<size_t>& sizes) {
  // Largest first, each to the smallest free chunk that holds it.
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<bool> taken(chunks_.size(), false);
  std::vector<Tensor> out(sizes.size());
  std::vector<Tensor> fresh;
  int64_t fresh_bytes = 0;
  for (size_t i : order) {
    size_t best = chunks_.size();
    for (size_t c = 0; c < chunks_.size(); ++c) {
      if (taken[c] || chunks_[c].nbytes() < sizes[i]) continue;
      if (best == chunks_.size() || chunks_[c].nbytes() < chunks_[best].nbytes()) best = c;
    }
    if (best < chunks_.size()) {
      taken[best] = true;
      out[i] = chunks_[best];
      continue;
    }
    // At least one byte: every buffer has storage to point at.
    const int64_t n = static_cast<int64_t>(std::max<size_t>(sizes[i], 1));
    Tensor t = backend_ ? Tensor::empty(backend_, device_, DType::kUInt8, {n}, account_)
                        : Tensor::empty_host(DType::kUInt8, {n});
    fresh_bytes += n;
    fresh.push_back(t);
    out[i] = std::move(t);
  }
  // Only now, all allocated: a quota error above leaves the pool as it was.
  for (auto& t : fresh) chunks_.push_back(std::move(t));
  reserved_ += fresh_bytes;
  return out;
}

int64_t GraphPool::reserved() const {
  std::lock_guard<std::mutex> lk(mu_);
  return reserved_;
}

size_t GraphPool::chunks() const {
  std::lock_guard<std::mutex> lk(mu_);
  return chunks_.size();
}

}  // namespace tensord
