// The fingerprint GlooProcessGroup's ranks exchange before each collective:
// what each rank is about to run (seq, op, dtype, shape, dim, src, split
// sizes), so disagreeing ranks fail together with a named error before any
// data moves, and a rank that never arrives is named.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ops/dist/collective.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}
}  // namespace gloo

namespace tensord::dist {

class Fingerprint {
 public:
  // This rank's, for `call` in a group of `size`.
  Fingerprint(const CollectiveCall& call, int size);
  // A blank one to receive a peer's into.
  explicit Fingerprint(int size);

  int64_t* data() { return w_.data(); }
  size_t nbytes() const { return w_.size() * sizeof(int64_t); }

  uint64_t seq() const { return static_cast<uint64_t>(w_[kSeq]); }
  CollectiveOp op() const { return static_cast<CollectiveOp>(w_[kOp]); }
  ReduceOp reduce() const { return static_cast<ReduceOp>(w_[kReduce]); }
  DType dtype() const { return static_cast<DType>(w_[kDtype]); }
  int64_t dim() const { return w_[kDim]; }
  int64_t src() const { return w_[kSrc]; }
  int64_t dim_extent() const { return w_[kDimExtent]; }
  // all_to_all: the extent this rank sends to rank r.
  int64_t split(int r) const { return w_[kHeader + static_cast<size_t>(r)]; }
  bool has_tensor() const { return w_[kNdim] >= 0; }
  // "float32[4, 3]" (dims past the eighth as "...").
  std::string meta_str() const;
  // Same rank count and extents; the extent along dim() ignored when
  // `except_dim`.
  bool same_shape(const Fingerprint& o, bool except_dim) const;

 private:
  enum : size_t { kMagic, kSeq, kOp, kReduce, kDtype, kDim, kSrc, kNdim, kNumel, kDimExtent, kRestHash, kDims };
  static constexpr size_t kMaxDims = 8;
  static constexpr size_t kHeader = kDims + kMaxDims;
  std::vector<int64_t> w_;
};

// Thrown by exchange_fingerprints: the group ranks whose fingerprint had
// not arrived by the deadline, or (`left`) whose connection closed first:
// they failed or were aborted (GlooProcessGroup::abort), or their process
// died.
struct MissingRanks {
  std::vector<int> ranks;
  bool left = false;
};

// Thrown by exchange_fingerprints when its ExchangeAbort was aborted.
struct ExchangeAborted {};

// Lets another thread end the exchange in progress on a group's thread,
// and every later one, at once (the group's abort): its waits are Gloo's
// own abortWaitRecv/abortWaitSend, no polling. Thread-safe.
class ExchangeAbort {
 public:
  void abort();
  bool aborted() const;

 private:
  friend class ExchangeWaits;
  mutable std::mutex mu_;
  bool aborted_ = false;
  std::vector<gloo::transport::UnboundBuffer*> live_;  // the exchange in progress's
};

// Sends this rank's fingerprint to every peer and receives theirs, point to
// point over the context's pairs (a slot of its own per seq). Returns them
// in rank order; throws MissingRanks at the deadline or as soon as a
// missing peer's connection closes, ExchangeAborted when `abort` is
// aborted, leaving the pending buffers in `graveyard` either way.
std::vector<Fingerprint> exchange_fingerprints(gloo::Context& ctx, const CollectiveCall& call,
                                               std::chrono::steady_clock::time_point deadline,
                                               std::vector<std::shared_ptr<void>>& graveyard,
                                               ExchangeAbort* abort = nullptr);

// Throws Error (kDtypeMismatch, kShapeMismatch, kInvalidArgument) naming
// the ranks that disagree about `call`; `what` names the collective,
// `global_ranks` maps group ranks to the names used.
void check_fingerprints(const std::vector<Fingerprint>& fps, const CollectiveCall& call, const std::string& what,
                        const std::vector<int>& global_ranks);

}  // namespace tensord::dist
