// The vocabulary of collectives (API.md 8): which op, which reduction, the
// per-call options, and the description of one call a backend runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ops/tensor.h"

namespace tensord::dist {

// torch.distributed.ReduceOp's subset of API.md 8.
enum class ReduceOp : uint8_t { kSum, kAvg, kMax, kMin, kProd };

enum class CollectiveOp : uint8_t { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAllToAll, kBarrier };
inline constexpr int kNumCollectiveOps = 6;

// "sum", "avg", ...; the op names of API.md 8: "all_reduce", "all_gather", ...
std::string_view reduce_op_name(ReduceOp op);
std::optional<ReduceOp> reduce_op_from_name(std::string_view name);
std::string_view collective_op_name(CollectiveOp op);

struct CollectiveOptions {
  // How long the collective may take once it starts on this rank (waiting
  // for the other ranks included); zero: the group's default (60 s).
  std::chrono::milliseconds timeout{0};
};

// One collective as the seam hands it to a backend: validated on this rank,
// its seq taken, recorded as scheduled.
struct CollectiveCall {
  CollectiveOp op = CollectiveOp::kBarrier;
  ReduceOp reduce = ReduceOp::kSum;  // all_reduce, reduce_scatter
  Tensor input;                      // undefined for barrier
  int64_t dim = 0;                   // all_gather, reduce_scatter, all_to_all
  int src = 0;                       // broadcast: a rank within the group
  // all_to_all: the extent along `dim` this rank sends to each rank (size()
  // entries summing to input.shape[dim]); filled with the even split when
  // the caller gave none.
  std::vector<int64_t> split_sizes;
  uint64_t seq = 0;
  std::chrono::milliseconds timeout{0};  // resolved: never zero here
};

}  // namespace tensord::dist
