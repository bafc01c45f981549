#include "ops/dist/gloo_fingerprint.h"

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <string>

#include "ops/error.h"

namespace tensord::dist {

namespace chr = std::chrono;

namespace {

constexpr int64_t kFingerprintMagic = 0x7464666770;  // "tdfgp"
// A slot prefix Gloo's own collectives do not use (they take 0x01..0x08).
constexpr uint8_t kFingerprintSlotPrefix = 0x7e;

}  // namespace

void ExchangeAbort::abort() {
  std::lock_guard lk(mu_);
  aborted_ = true;
  for (auto* b : live_) {
    b->abortWaitRecv();
    b->abortWaitSend();
  }
}

bool ExchangeAbort::aborted() const {
  std::lock_guard lk(mu_);
  return aborted_;
}

// An exchange's buffers, known to its ExchangeAbort while it waits on them.
class ExchangeWaits {
 public:
  // Throws ExchangeAborted when `a` was aborted already.
  ExchangeWaits(ExchangeAbort* a, std::vector<gloo::transport::UnboundBuffer*> bufs) : a_(a) {
    if (!a_) return;
    std::lock_guard lk(a_->mu_);
    if (a_->aborted_) throw ExchangeAborted{};
    a_->live_ = std::move(bufs);
  }
  ~ExchangeWaits() {
    if (!a_) return;
    std::lock_guard lk(a_->mu_);
    a_->live_.clear();
  }
  ExchangeWaits(const ExchangeWaits&) = delete;
  ExchangeWaits& operator=(const ExchangeWaits&) = delete;
  bool aborted() const { return a_ && a_->aborted(); }

 private:
  ExchangeAbort* a_;
};

Fingerprint::Fingerprint(int size) : w_(kHeader + static_cast<size_t>(size), 0) {}

Fingerprint::Fingerprint(const CollectiveCall& call, int size) : Fingerprint(size) {
  w_[kMagic] = kFingerprintMagic;
  w_[kSeq] = static_cast<int64_t>(call.seq);
  w_[kOp] = static_cast<int64_t>(call.op);
  w_[kReduce] = static_cast<int64_t>(call.reduce);
  w_[kDim] = call.dim;
  w_[kSrc] = call.src;
  w_[kNdim] = -1;
  if (call.input.defined()) {
    const Shape& s = call.input.shape();
    w_[kDtype] = static_cast<int64_t>(call.input.dtype());
    w_[kNdim] = static_cast<int64_t>(s.size());
    w_[kNumel] = call.input.numel();
    w_[kDimExtent] = call.dim < static_cast<int64_t>(s.size()) ? s[static_cast<size_t>(call.dim)] : 0;
    // FNV-1a over the extents past the eighth, dim's left out (compared
    // through kDimExtent where it must match).
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < s.size(); ++i) {
      if (i < kMaxDims) {
        w_[kDims + i] = s[i];
      } else if (static_cast<int64_t>(i) != call.dim) {
        h = (h ^ static_cast<uint64_t>(s[i])) * 1099511628211ull;
      }
    }
    w_[kRestHash] = static_cast<int64_t>(h);
  }
  for (size_t r = 0; r < call.split_sizes.size() && kHeader + r < w_.size(); ++r) w_[kHeader + r] = call.split_sizes[r];
}

std::string Fingerprint::meta_str() const {
  if (!has_tensor()) return "no tensor";
  std::string s(dtype_name(dtype()));
  s += '[';
  const auto nd = static_cast<size_t>(w_[kNdim]);
  for (size_t i = 0; i < nd && i < kMaxDims; ++i) s += (i ? ", " : "") + std::to_string(w_[kDims + i]);
  if (nd > kMaxDims) s += ", ...";
  return s + ']';
}

bool Fingerprint::same_shape(const Fingerprint& o, bool except_dim) const {
  if (w_[kNdim] != o.w_[kNdim] || w_[kRestHash] != o.w_[kRestHash]) return false;
  if (!except_dim && (w_[kDimExtent] != o.w_[kDimExtent] || w_[kNumel] != o.w_[kNumel])) return false;
  for (size_t i = 0; i < kMaxDims; ++i) {
    if (except_dim && static_cast<int64_t>(i) == dim()) continue;
    if (w_[kDims + i] != o.w_[kDims + i]) return false;
  }
  return true;
}

std::vector<Fingerprint> exchange_fingerprints(gloo::Context& ctx, const CollectiveCall& call,
                                               chr::steady_clock::time_point deadline,
                                               std::vector<std::shared_ptr<void>>& graveyard, ExchangeAbort* abort) {
  const int R = ctx.size;
  const int me = ctx.rank;
  // Held through shared_ptr so a timed-out exchange can outlive this call.
  struct Exchange {
    std::vector<Fingerprint> fps;
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends, recvs;
  };
  auto x = std::make_shared<Exchange>();
  x->fps.reserve(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) x->fps.push_back(r == me ? Fingerprint(call, R) : Fingerprint(R));
  if (R == 1) return std::move(x->fps);
  const uint64_t slot = gloo::Slot::build(kFingerprintSlotPrefix, static_cast<uint32_t>(call.seq));
  Fingerprint& mine = x->fps[static_cast<size_t>(me)];
  x->sends.resize(static_cast<size_t>(R));
  x->recvs.resize(static_cast<size_t>(R));
  std::vector<gloo::transport::UnboundBuffer*> bufs;
  for (int r = 0; r < R; ++r) {
    if (r == me) continue;
    auto& fp = x->fps[static_cast<size_t>(r)];
    x->recvs[static_cast<size_t>(r)] = ctx.createUnboundBuffer(fp.data(), fp.nbytes());
    x->sends[static_cast<size_t>(r)] = ctx.createUnboundBuffer(mine.data(), mine.nbytes());
    bufs.push_back(x->recvs[static_cast<size_t>(r)].get());
    bufs.push_back(x->sends[static_cast<size_t>(r)].get());
  }
  // Known to `abort` before anything is posted: an abort from here on ends
  // the waits below at once (Gloo's abort flags stay set until a wait).
  ExchangeWaits waits(abort, std::move(bufs));
  MissingRanks missing;
  // Posting to a peer whose connection already closed throws its error.
  for (int r = 0; r < R; ++r) {
    if (r == me) continue;
    try {
      x->recvs[static_cast<size_t>(r)]->recv(r, slot);
      x->sends[static_cast<size_t>(r)]->send(r, slot);
    } catch (const gloo::IoException&) {
      missing.left = true;
      missing.ranks.push_back(r);
    }
  }
  const auto left = [&] {
    return std::max(chr::milliseconds(1), chr::duration_cast<chr::milliseconds>(deadline - chr::steady_clock::now()));
  };
  // A wait that did not complete: aborted (false), timed out, or its peer's
  // connection closed (Gloo's IoException says which).
  const auto wait_one = [&](int r, bool recv) {
    auto& b = recv ? x->recvs[static_cast<size_t>(r)] : x->sends[static_cast<size_t>(r)];
    try {
      if (recv ? b->waitRecv(left()) : b->waitSend(left())) return;
    } catch (const gloo::IoException& e) {
      if (std::string(e.what()).find("Timed out") == std::string::npos) missing.left = true;
    }
    missing.ranks.push_back(r);
  };
  // Once a peer has left, the collective cannot happen: the others are not
  // waited for.
  for (int r = 0; r < R && !missing.left; ++r) {
    if (r != me) wait_one(r, true);
  }
  for (int r = 0; r < R && missing.ranks.empty(); ++r) {
    if (r != me) wait_one(r, false);
  }
  if (!missing.ranks.empty()) {
    graveyard.push_back(x);
    if (waits.aborted()) throw ExchangeAborted{};
    throw missing;
  }
  return std::move(x->fps);
}

namespace {

std::string rank_name(const std::vector<int>& global_ranks, int r) {
  return "rank " + std::to_string(global_ranks[static_cast<size_t>(r)]);
}

}  // namespace

void check_fingerprints(const std::vector<Fingerprint>& fps, const CollectiveCall& call, const std::string& what,
                        const std::vector<int>& global_ranks) {
  const Fingerprint& a = fps[0];
  for (int r = 1; r < static_cast<int>(fps.size()); ++r) {
    const Fingerprint& b = fps[static_cast<size_t>(r)];
    const std::string pair = rank_name(global_ranks, 0) + " has ";
    const std::string other = ", " + rank_name(global_ranks, r) + " has ";
    const std::string head = what + ": ranks disagree: ";
    if (b.seq() != a.seq() || b.op() != a.op()) {
      throw Error(ErrorCode::kInvalidArgument,
                  head + rank_name(global_ranks, 0) + " runs " + std::string(collective_op_name(a.op())) + " (seq " +
                      std::to_string(a.seq()) + "), " + rank_name(global_ranks, r) + " runs " +
                      std::string(collective_op_name(b.op())) + " (seq " + std::to_string(b.seq()) + ")");
    }
    if (call.op == CollectiveOp::kBarrier) continue;
    if (b.dtype() != a.dtype()) {
      throw Error(ErrorCode::kDtypeMismatch, head + pair + a.meta_str() + other + b.meta_str());
    }
    const bool reduces = call.op == CollectiveOp::kAllReduce || call.op == CollectiveOp::kReduceScatter;
    if (reduces && b.reduce() != a.reduce()) {
      throw Error(ErrorCode::kInvalidArgument, head + pair + "op " + std::string(reduce_op_name(a.reduce())) + other +
                                                   "op " + std::string(reduce_op_name(b.reduce())));
    }
    if (call.op != CollectiveOp::kAllReduce && call.op != CollectiveOp::kBroadcast && b.dim() != a.dim()) {
      throw Error(ErrorCode::kInvalidArgument,
                  head + pair + "dim " + std::to_string(a.dim()) + other + "dim " + std::to_string(b.dim()));
    }
    if (call.op == CollectiveOp::kBroadcast && b.src() != a.src()) {
      throw Error(ErrorCode::kInvalidArgument,
                  head + pair + "src " + std::to_string(a.src()) + other + "src " + std::to_string(b.src()));
    }
    const bool uneven = call.op == CollectiveOp::kAllGather || call.op == CollectiveOp::kAllToAll;
    if (!a.same_shape(b, uneven)) {
      throw Error(ErrorCode::kShapeMismatch,
                  head + pair + a.meta_str() + other + b.meta_str() +
                      (uneven ? " (they may differ along dim " + std::to_string(a.dim()) + " only)" : ""));
    }
  }
}

}  // namespace tensord::dist
