#include "ops/dist/gloo_process_group.h"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

#include "ops/dist/dim_layout.h"
#include "ops/dist/gloo_fingerprint.h"
#include "ops/dist/gloo_text.h"
#include "ops/error.h"

namespace tensord::dist {

namespace chr = std::chrono;

namespace {
// Gloo's TCP pairs write with writev, which raises SIGPIPE on a connection
// its peer closed (an aborted group's, ProcessGroup::abort): the default
// action ends the process (a unit test died of it). As under Python, where
// PyTorch runs Gloo, the signal is ignored and the write fails with EPIPE,
// which Gloo reports. Only when nobody installed a handler of their own.
void ignore_sigpipe() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction now {};
    if (sigaction(SIGPIPE, nullptr, &now) == 0 && now.sa_handler == SIG_DFL) {
      struct sigaction ign {};
      ign.sa_handler = SIG_IGN;
      sigemptyset(&ign.sa_mask);
      sigaction(SIGPIPE, &ign, nullptr);
    }
  });
}
}  // namespace

std::shared_ptr<gloo::transport::Device> make_tcp_device(const std::string& hostname) {
  gloo::transport::tcp::attr attr;
  attr.hostname = hostname;
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kUnavailable,
                "gloo: no TCP device on " + hostname + ": " + without_source_position(e.what()));
  }
}

std::string GlooProcessGroup::version() {
  return std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) + "." +
         std::to_string(GLOO_VERSION_PATCH);
}

GlooProcessGroup::GlooProcessGroup(int rank, int size, ProcessGroupOptions opts, GlooOptions gloo)
    : ProcessGroup(rank, size, std::move(opts)), gloo_(std::move(gloo)) {
  ignore_sigpipe();
  TENSORD_CHECK(gloo_.store != nullptr, kInvalidArgument, "gloo group " + name() + ": no rendezvous store");
  TENSORD_CHECK(gloo_.rendezvous_timeout.count() > 0, kInvalidArgument,
                "gloo group " + name() + ": the rendezvous timeout must be positive");
  const std::string prefix = gloo_.key_prefix.empty() ? name() : gloo_.key_prefix;
  prefix_store_ = std::make_shared<gloo::rendezvous::PrefixStore>(prefix, *gloo_.store);
  if (!gloo_.device) gloo_.device = make_tcp_device(gloo_.hostname);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  // The context's timeout bounds the store waits of the rendezvous; each
  // collective sets its own.
  ctx->setTimeout(gloo_.rendezvous_timeout);
  const std::string who = "gloo group " + name() + ": rank " + std::to_string(rank) + " of " + std::to_string(size);
  try {
    ctx->connectFullMesh(*prefix_store_, gloo_.device);
  } catch (const gloo::IoException& e) {
    throw Error(ErrorCode::kDeadlineExceeded,
                who + " could not join within " + std::to_string(gloo_.rendezvous_timeout.count()) +
                    " ms (ranks missing from the store): " + without_source_position(e.what()));
  } catch (const gloo::Exception& e) {
    throw Error(ErrorCode::kUnavailable, who + " could not join: " + without_source_position(e.what()));
  }
  context_ = std::move(ctx);
  recorder()->set_comm_lib_version(version());
  start_worker();
}

GlooProcessGroup::~GlooProcessGroup() {
  // A fingerprint exchange in progress ends now, not at its timeout.
  stop_worker([this] { abort("the group was destroyed"); });
}

void GlooProcessGroup::abort(const std::string& reason) {
  const std::string why = reason.empty() ? "aborted" : reason;
  {
    std::lock_guard lock(mu_);
    if (!aborted_.empty()) return;
    aborted_ = why;
  }
  exchange_abort_.abort();
  cancel_queued(why);
  // Peers waiting on this rank (its fingerprint, its data) see their
  // connection close and fail at once. Pair::close takes each pair's lock:
  // safe beside the group's thread.
  context_->closeConnections();
}

void GlooProcessGroup::break_group(std::string why) {
  broken_ = std::move(why);
  context_->closeConnections();
}

bool GlooProcessGroup::supports(CollectiveOp) const {
  return true;
}

bool GlooProcessGroup::supports_dtype(CollectiveOp op, ReduceOp, DType dtype) const {
  if (op != CollectiveOp::kAllReduce && op != CollectiveOp::kReduceScatter) return true;  // bytes moved as they are
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kInt16:
    case DType::kInt8:
    case DType::kUInt8:
      return true;
    default:
      return false;
  }
}

namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <class T>
ReduceFn reduce_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:  // Gloo has no average: a sum, divided afterwards
      return static_cast<ReduceFn>(&gloo::sum<T>);
    case ReduceOp::kProd:
      return static_cast<ReduceFn>(&gloo::product<T>);
    case ReduceOp::kMax:
      return static_cast<ReduceFn>(&gloo::max<T>);
    case ReduceOp::kMin:
      return static_cast<ReduceFn>(&gloo::min<T>);
  }
  return nullptr;
}

// Calls f(T{}) for the reduction dtypes GlooProcessGroup::supports_dtype lists.
template <class F>
void dispatch_reduce_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32:
      return f(float{});
    case DType::kFloat64:
      return f(double{});
    case DType::kInt32:
      return f(int32_t{});
    case DType::kInt64:
      return f(int64_t{});
    case DType::kInt16:
      return f(int16_t{});
    case DType::kInt8:
      return f(int8_t{});
    case DType::kUInt8:
      return f(uint8_t{});
    default:
      TENSORD_ASSERT(false);  // refused by supports_dtype before a seq was taken
  }
}

// Divides n elements by `size` in place (avg; integers truncate, as
// NCCL's average of integers does).
template <class T>
void divide(void* p, size_t n, int size) {
  T* v = static_cast<T*>(p);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(v[i] / static_cast<T>(size));
}

uint8_t* bytes(const Tensor& t) {
  return static_cast<uint8_t*>(t.data());
}

}  // namespace

// Elementwise reduction of every rank's `in` into `out` (n elements of
// dtype) with gloo::allreduce; avg is Gloo's sum divided by the size.
static void gloo_allreduce(const std::shared_ptr<gloo::Context>& ctx, DType dtype, ReduceOp op, const void* in,
                           void* out, size_t n, uint32_t tag, chr::milliseconds timeout) {
  dispatch_reduce_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    gloo::AllreduceOptions o(ctx);
    o.setInput(const_cast<T*>(static_cast<const T*>(in)), n);
    o.setOutput(static_cast<T*>(out), n);
    o.setReduceFunction(reduce_fn<T>(op));
    o.setTag(tag);
    o.setTimeout(timeout);
    gloo::allreduce(o);
  });
}

static void divide_by(DType dtype, void* p, size_t n, int size) {
  dispatch_reduce_dtype(dtype, [&](auto zero) { divide<decltype(zero)>(p, n, size); });
}

std::vector<Tensor> GlooProcessGroup::run(const CollectiveCall& call, bool agree_only) {
  TENSORD_ASSERT(!agree_only);  // Gloo captures nothing: agree_captured is refused before
  const std::string what = describe(call);
  const auto aborted = [&] {
    std::lock_guard lock(mu_);
    return aborted_;
  };
  if (const std::string why = aborted(); !why.empty()) {
    throw Error(ErrorCode::kCancelled, what + " was aborted: " + why);
  }
  if (!broken_.empty()) {
    throw Error(ErrorCode::kUnavailable, what + " cannot run: the group is broken (" + broken_ + ")");
  }
  const auto deadline = chr::steady_clock::now() + call.timeout;
  const auto remaining = [&] {
    return std::max(chr::milliseconds(1), chr::duration_cast<chr::milliseconds>(deadline - chr::steady_clock::now()));
  };
  const auto tag = static_cast<uint32_t>(call.seq);
  const int R = size();
  const int me = rank();

  // Once the group is aborted, whatever Gloo throws is the abort: its
  // connections were closed under it (a post may then fail in Gloo's own
  // checks, "epoll_ctl: Bad file descriptor", seen in CI).
  const auto if_aborted = [&] {
    if (const std::string why = aborted(); !why.empty()) {
      break_group(what + " was aborted");
      throw Error(ErrorCode::kCancelled, what + " was aborted: " + why);
    }
  };
  // Anything else Gloo throws (its own checks, EnforceNotMet; a non-I/O
  // gloo::Exception) breaks the group: kInternal, Gloo's words in it.
  const auto failed_inside_gloo = [&](const char* gloo_says) {
    if_aborted();
    break_group(what + " failed");
    throw Error(ErrorCode::kInternal, what + " failed inside Gloo: " + without_source_position(gloo_says));
  };

  // Every rank's fingerprint, checked alike on every rank.
  std::vector<Fingerprint> fps;
  try {
    fps = exchange_fingerprints(*context_, call, deadline, graveyard_, &exchange_abort_);
  } catch (const ExchangeAborted&) {
    break_group(what + " was aborted");
    throw Error(ErrorCode::kCancelled, what + " was aborted: " + aborted());
  } catch (const gloo::EnforceNotMet& e) {
    failed_inside_gloo(e.what());
  } catch (const gloo::Exception& e) {
    if_aborted();
    throw;
  } catch (const MissingRanks& m) {
    std::string ranks;
    for (int r : m.ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(global_ranks()[static_cast<size_t>(r)]);
    if (m.left) {
      break_group(what + " failed");
      throw Error(ErrorCode::kUnavailable, what + " failed: ranks [" + ranks +
                                               "] had not arrived and left the group (they failed, were aborted "
                                               "or their server went away)");
    }
    break_group(what + " timed out");
    throw Error(ErrorCode::kDeadlineExceeded, what + " timed out after " + std::to_string(call.timeout.count()) +
                                                  " ms: ranks [" + ranks + "] had not arrived");
  }
  check_fingerprints(fps, call, what, global_ranks());

  const Tensor& x = call.input;
  std::vector<Tensor> outputs;
  try {
    switch (call.op) {
      case CollectiveOp::kAllReduce: {
        Tensor out = Tensor::empty_host(x.dtype(), x.shape());
        const auto n = static_cast<size_t>(x.numel());
        if (n > 0) gloo_allreduce(context_, x.dtype(), call.reduce, x.data(), out.data(), n, tag, remaining());
        if (call.reduce == ReduceOp::kAvg) divide_by(x.dtype(), out.data(), n, R);
        outputs.push_back(std::move(out));
        break;
      }
      case CollectiveOp::kReduceScatter: {
        // Debian's Gloo ships ReduceScatterHalvingDoubling, but as an old
        // style algorithm bound to the context's pair timeout (no per-call
        // timeout or tag) with int counts; so, as PyTorch's Gloo backend
        // does, an allreduce of the whole tensor and this rank's part of it.
        Tensor sum = Tensor::empty_host(x.dtype(), x.shape());
        const auto n = static_cast<size_t>(x.numel());
        if (n > 0) gloo_allreduce(context_, x.dtype(), call.reduce, x.data(), sum.data(), n, tag, remaining());
        DimLayout l(x.shape(), call.dim, dtype_size(x.dtype()));
        const int64_t part = l.len / R;
        Shape s = x.shape();
        s[static_cast<size_t>(call.dim)] = part;
        Tensor out = Tensor::empty_host(x.dtype(), s);
        if (n > 0) copy_slices_out(sum.data(), l, part * me, part, out.data());
        if (call.reduce == ReduceOp::kAvg) divide_by(x.dtype(), out.data(), static_cast<size_t>(out.numel()), R);
        outputs.push_back(std::move(out));
        break;
      }
      case CollectiveOp::kAllGather: {
        DimLayout l(x.shape(), call.dim, dtype_size(x.dtype()));
        std::vector<size_t> counts(static_cast<size_t>(R));
        int64_t total = 0;
        for (int r = 0; r < R; ++r) {
          const int64_t ext = fps[static_cast<size_t>(r)].dim_extent();
          counts[static_cast<size_t>(r)] = l.block_bytes(ext);
          total += ext;
        }
        Shape s = x.shape();
        s[static_cast<size_t>(call.dim)] = total;
        Tensor out = Tensor::empty_host(x.dtype(), s);
        const bool direct = l.outer == 1;  // rank blocks are already in place along dim
        Tensor gathered = direct ? out : Tensor::empty_host(x.dtype(), s);
        if (out.nbytes() > 0) {
          const bool even = std::all_of(counts.begin(), counts.end(), [&](size_t c) { return c == counts[0]; });
          if (even) {
            gloo::AllgatherOptions o(context_);
            o.setInput(bytes(x), x.nbytes());
            o.setOutput(bytes(gathered), gathered.nbytes());
            o.setTag(tag);
            o.setTimeout(remaining());
            gloo::allgather(o);
          } else {
            gloo::AllgathervOptions o(context_);
            o.setInput(bytes(x), x.nbytes());
            o.setOutput(bytes(gathered), counts);
            o.setTag(tag);
            o.setTimeout(remaining());
            gloo::allgatherv(o);
          }
          if (!direct) {
            DimLayout lo(s, call.dim, l.elem_size);
            size_t off = 0;
            int64_t start = 0;
            for (int r = 0; r < R; ++r) {
              const int64_t ext = fps[static_cast<size_t>(r)].dim_extent();
              copy_slices_in(bytes(gathered) + off, lo, start, ext, out.data());
              off += counts[static_cast<size_t>(r)];
              start += ext;
            }
          }
        }
        outputs.push_back(std::move(out));
        break;
      }
      case CollectiveOp::kBroadcast: {
        Tensor out = Tensor::empty_host(x.dtype(), x.shape());
        if (x.nbytes() > 0) {
          gloo::BroadcastOptions o(context_);
          o.setRoot(call.src);
          if (me == call.src) o.setInput(bytes(x), x.nbytes());
          o.setOutput(bytes(out), out.nbytes());
          o.setTag(tag);
          o.setTimeout(remaining());
          gloo::broadcast(o);
        }
        outputs.push_back(std::move(out));
        break;
      }
      case CollectiveOp::kAllToAll: {
        DimLayout l(x.shape(), call.dim, dtype_size(x.dtype()));
        std::vector<int64_t> send(static_cast<size_t>(R)), recv(static_cast<size_t>(R));
        int64_t total = 0;
        bool even = true;
        for (int r = 0; r < R; ++r) {
          send[static_cast<size_t>(r)] = static_cast<int64_t>(l.block_bytes(call.split_sizes[static_cast<size_t>(r)]));
          const int64_t ext = fps[static_cast<size_t>(r)].split(me);
          recv[static_cast<size_t>(r)] = static_cast<int64_t>(l.block_bytes(ext));
          total += ext;
          for (int p = 0; p < R; ++p) even = even && fps[static_cast<size_t>(r)].split(p) == call.split_sizes[0];
        }
        Shape s = x.shape();
        s[static_cast<size_t>(call.dim)] = total;
        Tensor out = Tensor::empty_host(x.dtype(), s);
        const bool direct = l.outer == 1;
        Tensor packed = x;
        if (!direct) {
          packed = Tensor::empty_host(x.dtype(), x.shape());
          size_t off = 0;
          int64_t start = 0;
          for (int r = 0; r < R; ++r) {
            const int64_t ext = call.split_sizes[static_cast<size_t>(r)];
            copy_slices_out(x.data(), l, start, ext, bytes(packed) + off);
            off += l.block_bytes(ext);
            start += ext;
          }
        }
        Tensor received = direct ? out : Tensor::empty_host(x.dtype(), s);
        if (even && x.nbytes() > 0) {
          gloo::AlltoallOptions o(context_);
          o.setInput(bytes(packed), packed.nbytes());
          o.setOutput(bytes(received), received.nbytes());
          o.setTag(tag);
          o.setTimeout(remaining());
          gloo::alltoall(o);
        } else if (!even) {
          gloo::AlltoallvOptions o(context_);
          o.setInput(bytes(packed), send);
          o.setOutput(bytes(received), recv);
          o.setTag(tag);
          o.setTimeout(remaining());
          gloo::alltoallv(o);
        }
        if (!direct) {
          DimLayout lo(s, call.dim, l.elem_size);
          size_t off = 0;
          int64_t start = 0;
          for (int r = 0; r < R; ++r) {
            const int64_t ext = fps[static_cast<size_t>(r)].split(me);
            copy_slices_in(bytes(received) + off, lo, start, ext, out.data());
            off += static_cast<size_t>(recv[static_cast<size_t>(r)]);
            start += ext;
          }
        }
        outputs.push_back(std::move(out));
        break;
      }
      case CollectiveOp::kBarrier: {
        gloo::BarrierOptions o(context_);
        o.setTag(tag);
        o.setTimeout(remaining());
        gloo::barrier(o);
        break;
      }
    }
  } catch (const gloo::IoException& e) {
    if_aborted();
    const std::string msg = without_source_position(e.what());
    break_group(what + " failed");
    if (msg.find("Timed out") != std::string::npos) {
      throw Error(ErrorCode::kDeadlineExceeded,
                  what + " timed out after " + std::to_string(call.timeout.count()) + " ms: " + msg);
    }
    throw Error(ErrorCode::kUnavailable, what + " failed: " + msg);
  } catch (const gloo::Exception& e) {
    failed_inside_gloo(e.what());
  } catch (const gloo::EnforceNotMet& e) {
    failed_inside_gloo(e.what());
  }
  return outputs;
}

}  // namespace tensord::dist
