#include "ops/dist/process_group.h"

#include <numeric>
#include <utility>

#include "ops/dist/captured_collective.h"
#include "ops/error.h"

namespace tensord::dist {

std::string group_name(const std::vector<int>& ranks, int world_size) {
  bool whole = static_cast<int>(ranks.size()) == world_size;
  for (size_t i = 0; whole && i < ranks.size(); ++i) whole = ranks[i] == static_cast<int>(i);
  if (whole) return "world";
  std::string s = "ranks:";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ranks[i]);
  }
  return s;
}

namespace {
std::atomic<uint64_t> g_next_uid{1};
}  // namespace

ProcessGroup::ProcessGroup(int rank, int size, ProcessGroupOptions opts)
    : rank_(rank), size_(size), uid_(g_next_uid.fetch_add(1)), opts_(std::move(opts)) {
  TENSORD_CHECK(size >= 1 && rank >= 0 && rank < size, kInvalidArgument,
                "rank " + std::to_string(rank) + " is not in a group of " + std::to_string(size));
  if (opts_.desc.empty()) opts_.desc = opts_.name;
  if (opts_.global_ranks.empty()) {
    opts_.global_ranks.resize(static_cast<size_t>(size));
    std::iota(opts_.global_ranks.begin(), opts_.global_ranks.end(), 0);
  }
  TENSORD_CHECK(static_cast<int>(opts_.global_ranks.size()) == size, kInvalidArgument,
                "group " + opts_.name + ": " + std::to_string(opts_.global_ranks.size()) + " global ranks for " +
                    std::to_string(size) + " ranks");
  TENSORD_CHECK(opts_.timeout.count() > 0, kInvalidArgument, "group " + opts_.name + ": the timeout must be positive");
  if (!opts_.recorder) opts_.recorder = std::make_shared<FlightRecorder>(opts_.global_ranks[static_cast<size_t>(rank)]);
  opts_.recorder->register_group(opts_.name, opts_.desc, opts_.pg_id, opts_.global_ranks);
}

void ProcessGroup::start_worker() {
  worker_.start([this](const CollectiveWorker::Task& t) { return run(t.call, t.agree_only); },
                [this] { on_worker_start(); });
}

void ProcessGroup::stop_worker(const std::function<void()>& interrupt) {
  worker_.stop(
      [this](const CollectiveCall& c) {
        return Error(ErrorCode::kCancelled, describe(c) + " was cancelled: the group was destroyed first");
      },
      interrupt);
}

void ProcessGroup::cancel_queued(const std::string& why) {
  worker_.fail_queued(
      [&](const CollectiveCall& c) { return Error(ErrorCode::kCancelled, describe(c) + " was aborted: " + why); });
}

void ProcessGroup::enqueue(CollectiveCall call, const std::shared_ptr<Work>& work) {
  CollectiveWorker::Task t{std::move(call), work, false};
  if (worker_.push(std::move(t))) return;
  work->fail(std::make_exception_ptr(Error(ErrorCode::kCancelled, "group " + name() + " is shutting down")));
}

void ProcessGroup::enqueue_agreement(const CollectiveCall& call, const std::shared_ptr<Work>& work) {
  if (!worker_.push(CollectiveWorker::Task{call, work, true})) {
    throw Error(ErrorCode::kCancelled, std::string(backend_name()) + " group " + name() + " is shutting down");
  }
}

uint64_t ProcessGroup::last_seq() const {
  std::lock_guard lock(seq_mu_);
  return seq_;
}

std::string ProcessGroup::describe(const CollectiveCall& call) const {
  return std::string(backend_name()) + " " + std::string(collective_op_name(call.op)) + " (seq " +
         std::to_string(call.seq) + ") in group " + name();
}

void ProcessGroup::check_supported(CollectiveOp op, ReduceOp reduce, const Tensor* x) const {
  const std::string op_name(collective_op_name(op));
  if (!supports(op)) {
    throw Error(ErrorCode::kUnsupported, "backend " + std::string(backend_name()) + " does not support " + op_name);
  }
  if (!x) return;
  TENSORD_CHECK(x->defined(), kInvalidArgument, op_name + " needs a tensor");
  TENSORD_CHECK(x->on_host() != takes_device_tensors(), kUnsupported,
                "backend " + std::string(backend_name()) + " " + op_name + " takes " +
                    (takes_device_tensors() ? "device" : "host") + " tensors only");
  if (!supports_dtype(op, reduce, x->dtype())) {
    std::string what = op_name;
    if (op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter) {
      what += " with op " + std::string(reduce_op_name(reduce));
    }
    throw Error(ErrorCode::kUnsupported, "backend " + std::string(backend_name()) + " does not support " + what +
                                             " on dtype " + std::string(dtype_name(x->dtype())));
  }
}

int64_t ProcessGroup::check_dim(const Tensor& x, int64_t dim, CollectiveOp op) const {
  const int64_t nd = x.dim();
  const int64_t d = dim < 0 ? dim + nd : dim;
  TENSORD_CHECK(
      nd >= 1 && d >= 0 && d < nd, kInvalidArgument,
      std::string(collective_op_name(op)) + ": dim " + std::to_string(dim) + " is out of range for " + x.meta().str());
  return d;
}

std::chrono::milliseconds ProcessGroup::resolve(const CollectiveOptions& o) const {
  return o.timeout.count() > 0 ? o.timeout : opts_.timeout;
}

std::shared_ptr<Work> ProcessGroup::take_seq(CollectiveCall& call) {
  // What the flight recorder shows before the collective runs; all_gather's
  // and all_to_all's output sizes are corrected when it completes.
  FlightRecord rec;
  rec.pg_id = opts_.pg_id;
  rec.pg_name = opts_.name;
  rec.pg_desc = opts_.desc;
  rec.profiling_name = std::string(backend_name()) + ":" + std::string(collective_op_name(call.op));
  rec.timeout_ms = call.timeout.count();
  if (call.input.defined()) {
    rec.input_sizes = {call.input.shape()};
    rec.input_dtypes = {call.input.dtype()};
    Shape out = call.input.shape();
    if (call.op == CollectiveOp::kAllGather) out[static_cast<size_t>(call.dim)] *= size_;
    if (call.op == CollectiveOp::kReduceScatter) out[static_cast<size_t>(call.dim)] /= size_;
    rec.output_sizes = {out};
    rec.output_dtypes = {call.input.dtype()};
  }
  call.seq = ++seq_;
  rec.collective_seq_id = call.seq;
  rec.op_id = call.seq;
  const uint64_t id = opts_.recorder->record(std::move(rec));
  auto work = std::make_shared<Work>(opts_.name, call.op, call.seq, opts_.recorder, id);
  if (opts_.on_collective)
    opts_.on_collective(opts_.name, rank_, call.op, call.input.defined() ? call.input.nbytes() : 0);
  return work;
}

std::shared_ptr<Work> ProcessGroup::submit(CollectiveCall call, const CollectiveOptions& o) {
  call.timeout = resolve(o);
  std::lock_guard lock(seq_mu_);
  auto work = take_seq(call);
  enqueue(std::move(call), work);
  return work;
}

std::shared_ptr<Work> ProcessGroup::record_replayed(CollectiveCall call) {
  TENSORD_ASSERT(call.timeout.count() > 0);
  std::lock_guard lock(seq_mu_);
  return take_seq(call);
}

CollectiveCall ProcessGroup::make_call(CollectiveOp op, const Tensor* x, ReduceOp reduce, int64_t dim, int src,
                                       std::vector<int64_t> split_sizes) const {
  check_supported(op, reduce, x);
  CollectiveCall call;
  call.op = op;
  if (op == CollectiveOp::kBarrier) return call;
  TENSORD_CHECK(x != nullptr, kInvalidArgument, std::string(collective_op_name(op)) + " needs a tensor");
  call.input = *x;
  switch (op) {
    case CollectiveOp::kAllReduce:
      call.reduce = reduce;
      break;
    case CollectiveOp::kAllGather:
      call.dim = check_dim(*x, dim, op);
      break;
    case CollectiveOp::kReduceScatter: {
      call.reduce = reduce;
      call.dim = check_dim(*x, dim, op);
      const int64_t n = x->shape()[static_cast<size_t>(call.dim)];
      TENSORD_CHECK(n % size_ == 0, kShapeMismatch,
                    "reduce_scatter: " + x->meta().str() + " does not split evenly along dim " +
                        std::to_string(call.dim) + " into " + std::to_string(size_) + " ranks");
      break;
    }
    case CollectiveOp::kBroadcast:
      TENSORD_CHECK(src >= 0 && src < size_, kInvalidArgument,
                    "broadcast: src " + std::to_string(src) + " is not a rank of group " + opts_.name + " (size " +
                        std::to_string(size_) + ")");
      call.src = src;
      break;
    case CollectiveOp::kAllToAll: {
      call.dim = check_dim(*x, dim, op);
      const int64_t n = x->shape()[static_cast<size_t>(call.dim)];
      if (split_sizes.empty()) {
        TENSORD_CHECK(n % size_ == 0, kShapeMismatch,
                      "all_to_all: " + x->meta().str() + " does not split evenly along dim " +
                          std::to_string(call.dim) + " into " + std::to_string(size_) + " ranks");
        split_sizes.assign(static_cast<size_t>(size_), n / size_);
      }
      TENSORD_CHECK(
          static_cast<int>(split_sizes.size()) == size_, kInvalidArgument,
          "all_to_all: " + std::to_string(split_sizes.size()) + " split sizes for " + std::to_string(size_) + " ranks");
      int64_t total = 0;
      for (int64_t s : split_sizes) {
        TENSORD_CHECK(s >= 0, kInvalidArgument, "all_to_all: a negative split size");
        total += s;
      }
      TENSORD_CHECK(total == n, kShapeMismatch,
                    "all_to_all: split sizes sum to " + std::to_string(total) + ", dim " + std::to_string(call.dim) +
                        " of " + x->meta().str() + " is " + std::to_string(n));
      call.split_sizes = std::move(split_sizes);
      break;
    }
    case CollectiveOp::kBarrier:
      break;
  }
  return call;
}

std::shared_ptr<Work> ProcessGroup::all_reduce(const Tensor& x, ReduceOp op, const CollectiveOptions& o) {
  return submit(make_call(CollectiveOp::kAllReduce, &x, op), o);
}

std::shared_ptr<Work> ProcessGroup::all_gather(const Tensor& x, int64_t dim, const CollectiveOptions& o) {
  return submit(make_call(CollectiveOp::kAllGather, &x, ReduceOp::kSum, dim), o);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(const Tensor& x, ReduceOp op, int64_t dim,
                                                   const CollectiveOptions& o) {
  return submit(make_call(CollectiveOp::kReduceScatter, &x, op, dim), o);
}

std::shared_ptr<Work> ProcessGroup::broadcast(const Tensor& x, int src, const CollectiveOptions& o) {
  return submit(make_call(CollectiveOp::kBroadcast, &x, ReduceOp::kSum, 0, src), o);
}

std::shared_ptr<Work> ProcessGroup::all_to_all(const Tensor& x, int64_t dim, std::vector<int64_t> split_sizes,
                                               const CollectiveOptions& o) {
  return submit(make_call(CollectiveOp::kAllToAll, &x, ReduceOp::kSum, dim, 0, std::move(split_sizes)), o);
}

std::shared_ptr<Work> ProcessGroup::barrier(const CollectiveOptions& o) {
  return submit(make_call(CollectiveOp::kBarrier, nullptr), o);
}

Error ProcessGroup::no_capture(std::string_view what) const {
  return Error(ErrorCode::kUnsupported, "backend " + std::string(backend_name()) +
                                            " cannot capture collectives into a device graph (" + std::string(what) +
                                            " in group " + name() + "); its graphs replay through the executor");
}

std::shared_ptr<Work> ProcessGroup::agree_captured(const CollectiveCall& call) {
  throw no_capture(collective_op_name(call.op));
}

std::shared_ptr<void> ProcessGroup::launch_captured(const CollectiveCall& call, const Tensor&, Stream) {
  throw no_capture(collective_op_name(call.op));
}

void ProcessGroup::wait_captured(Stream, std::chrono::milliseconds, const std::atomic<bool>*, const std::string& what) {
  throw no_capture(what);
}

void ProcessGroup::prepare_captured(CollectiveCall call, const std::atomic<bool>* cancelled,
                                    const CollectiveOptions& o) {
  if (!supports_capture()) throw no_capture(collective_op_name(call.op));
  call.timeout = resolve(o);
  std::shared_ptr<Work> w = agree_captured(call);
  // As dist.*'s wait: polls, so that a cancelled capture (another rank
  // failed) stops waiting; the check itself ends on its own timeout.
  constexpr std::chrono::milliseconds kPoll{20};
  for (;;) {
    if (w->is_completed()) return w->wait();
    if (cancelled && cancelled->load()) {
      throw Error(ErrorCode::kCancelled, "cancelled while the ranks of group " + name() + " checked " +
                                             std::string(collective_op_name(call.op)) + " before a graph capture");
    }
    try {
      return w->wait(kPoll);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kDeadlineExceeded || w->is_completed()) throw;
    }
  }
}

std::shared_ptr<CapturedWork> ProcessGroup::enqueue_captured(CollectiveCall call, const Tensor& out, Stream stream,
                                                             const CollectiveOptions& o) {
  if (!supports_capture()) throw no_capture(collective_op_name(call.op));
  call.timeout = resolve(o);
  std::shared_ptr<void> keep = launch_captured(call, out, stream);
  return std::make_shared<CapturedCollective>(*this, std::move(call), out, stream, std::move(keep));
}

}  // namespace tensord::dist
