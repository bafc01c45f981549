// The collectives' metric families (API.md 8), registered by this
// component: tensord_collective_ops_total{group, op} (once per collective:
// counted by the group's first member) and
// tensord_collective_bytes_total{group, op} (the input bytes each rank
// contributes, summed over ranks).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "ops/dist/collective.h"

namespace tensord {

class CollectiveMetrics {
 public:
  explicit CollectiveMetrics(bool enabled = true);
  ~CollectiveMetrics();
  // A rank submitted a collective; `first_member`: the group's rank 0.
  void submitted(const std::string& group, dist::CollectiveOp op, size_t bytes, bool first_member);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensord
