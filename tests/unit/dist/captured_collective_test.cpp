// The host side of collectives captured into a device graph (API.md 8: "on
// CUDA, NCCL kernels are captured into the graph"): the check before the
// capture takes no seq, every launch takes the group's next seq and a
// flight-recorder entry that completes once the launch finished (or is
// retired when it failed), the launches are counted, and a backend that
// cannot capture (Gloo) refuses by name. A test backend stands in for NCCL's
// device half; tests/unit/cuda/spmd_graph_nccl_test.cpp runs the real one.
#include "ops/dist/captured_collective.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/dist/flight_recorder.h"
#include "ops/dist/process_group.h"
#include "ops/error.h"
#include "tests/unit/dist/dist_test_util.h"

namespace tensord::dist {
namespace {

using testing::error_of;

Tensor floats(int64_t n) {
  Tensor t = Tensor::empty_host(DType::kFloat32, {n});
  for (int64_t i = 0; i < n; ++i) t.data_ptr<float>()[i] = static_cast<float>(i);
  return t;
}

// A backend that captures: what it was asked to agree on and launch, and
// knobs for its failures.
class CapturingGroup final : public ProcessGroup {
 public:
  explicit CapturingGroup(ProcessGroupOptions o, int rank = 0, int size = 2) : ProcessGroup(rank, size, std::move(o)) {
    start_worker();
  }
  ~CapturingGroup() override { stop_worker(); }
  CapturingGroup(const CapturingGroup&) = delete;
  CapturingGroup& operator=(const CapturingGroup&) = delete;
  std::string_view backend_name() const override { return "test"; }
  bool supports(CollectiveOp) const override { return true; }
  bool supports_dtype(CollectiveOp, ReduceOp, DType) const override { return true; }
  bool supports_capture() const override { return true; }
  void wait_captured(Stream, std::chrono::milliseconds timeout, const std::atomic<bool>*,
                     const std::string& what) override {
    ++waits;
    last_wait_timeout = timeout;
    if (wait_fails) throw Error(ErrorCode::kDeadlineExceeded, what + " timed out");
  }
  void check_captured_launch(const std::string& what) const override {
    if (broken) throw Error(ErrorCode::kUnavailable, what + " cannot run: the group is broken");
  }

  std::vector<CollectiveCall> agreed;
  std::vector<CollectiveCall> launched;
  int waits = 0;
  std::chrono::milliseconds last_wait_timeout{0};
  bool disagree = false;     // agree_captured's Work fails
  bool never_agree = false;  // agree_captured's Work never finishes
  bool wait_fails = false;
  bool broken = false;
  std::vector<std::shared_ptr<Work>> pending;  // never_agree's

 protected:
  std::vector<Tensor> run(const CollectiveCall& call, bool) override { return {call.input}; }
  std::shared_ptr<Work> agree_captured(const CollectiveCall& call) override {
    agreed.push_back(call);
    auto w = std::make_shared<Work>(name(), call.op, 0, nullptr, 0);
    if (never_agree) {
      pending.push_back(w);
    } else if (disagree) {
      w->fail(std::make_exception_ptr(Error(ErrorCode::kShapeMismatch, "rank 1 disagrees")));
    } else {
      w->finish({});
    }
    return w;
  }
  std::shared_ptr<void> launch_captured(const CollectiveCall& call, const Tensor&, Stream) override {
    launched.push_back(call);
    return keep;
  }

 public:
  std::shared_ptr<int> keep = std::make_shared<int>(7);  // "the communicator"
};

struct Counted {
  int calls = 0;
  size_t bytes = 0;
};

ProcessGroupOptions options(const std::shared_ptr<FlightRecorder>& fr, Counted* counted = nullptr) {
  ProcessGroupOptions o;
  o.name = "world";
  o.timeout = std::chrono::milliseconds(1234);
  o.recorder = fr;
  if (counted) {
    o.on_collective = [counted](const std::string&, int, CollectiveOp, size_t bytes) {
      ++counted->calls;
      counted->bytes += bytes;
    };
  }
  return o;
}

TEST(CapturedCollective, ThePreparationChecksAcrossRanksAndTakesNoSeq) {
  auto fr = std::make_shared<FlightRecorder>(0);
  CapturingGroup pg(options(fr));
  Tensor x = floats(4);
  pg.prepare_captured(pg.make_call(CollectiveOp::kAllReduce, &x, ReduceOp::kMax), nullptr);
  ASSERT_EQ(pg.agreed.size(), 1u);
  EXPECT_EQ(pg.agreed[0].op, CollectiveOp::kAllReduce);
  EXPECT_EQ(pg.agreed[0].reduce, ReduceOp::kMax);
  EXPECT_EQ(pg.agreed[0].timeout.count(), 1234) << "the group's timeout, resolved";
  EXPECT_EQ(pg.last_seq(), 0u) << "the check before a capture takes no seq";
  EXPECT_TRUE(fr->dump().entries.empty()) << "and records nothing";
  EXPECT_TRUE(pg.launched.empty());

  pg.disagree = true;
  Error e = error_of([&] { pg.prepare_captured(pg.make_call(CollectiveOp::kAllGather, &x), nullptr); });
  EXPECT_EQ(e.code(), ErrorCode::kShapeMismatch) << e.message();
  EXPECT_NE(e.message().find("disagrees"), std::string::npos) << e.message();
}

TEST(CapturedCollective, APreparationStopsWaitingWhenCancelled) {
  auto fr = std::make_shared<FlightRecorder>(0);
  CapturingGroup pg(options(fr));
  pg.never_agree = true;
  Tensor x = floats(2);
  std::atomic<bool> cancelled{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cancelled.store(true);
  });
  const auto t0 = std::chrono::steady_clock::now();
  Error e = error_of([&] { pg.prepare_captured(pg.make_call(CollectiveOp::kBroadcast, &x), &cancelled); });
  canceller.join();
  EXPECT_EQ(e.code(), ErrorCode::kCancelled) << e.message();
  EXPECT_NE(e.message().find("broadcast"), std::string::npos) << e.message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << "a cancelled capture must not hang";
}

TEST(CapturedCollective, EveryLaunchTakesTheNextSeqAndCompletesItsEntry) {
  auto fr = std::make_shared<FlightRecorder>(0);
  fr->register_group("world", "world", 0, {0, 1});
  Counted counted;
  CapturingGroup pg(options(fr, &counted));
  Tensor x = floats(3);
  Tensor out = floats(6);  // all_gather over two ranks
  CollectiveCall call = pg.make_call(CollectiveOp::kAllGather, &x);
  pg.prepare_captured(call, nullptr);
  std::shared_ptr<CapturedWork> w = pg.enqueue_captured(call, out, Stream{});
  ASSERT_EQ(pg.launched.size(), 1u);
  EXPECT_EQ(pg.last_seq(), 0u) << "capturing takes no seq";
  EXPECT_EQ(counted.calls, 0) << "nor counts a collective";
  auto* cc = dynamic_cast<CapturedCollective*>(w.get());
  ASSERT_NE(cc, nullptr);

  OpContext ctx;
  ctx.group = &pg;
  for (uint64_t replay = 1; replay <= 2; ++replay) {
    w->before_launch();
    EXPECT_EQ(pg.last_seq(), replay) << "replay " << replay;
    EXPECT_EQ(cc->last_seq(), replay);
    auto entries = fr->dump().entries;
    ASSERT_EQ(entries.size(), replay);
    EXPECT_EQ(entries.back().state(), CollectiveState::kScheduled) << "before the launch";
    EXPECT_EQ(entries.back().profiling_name, "test:all_gather");
    w->launched();
    EXPECT_EQ(fr->dump().entries.back().state(), CollectiveState::kStarted) << "launched";
    w->wait(ctx);
    w->finished(true);
    entries = fr->dump().entries;
    EXPECT_EQ(entries.back().state(), CollectiveState::kCompleted) << "once the launch finished";
    EXPECT_EQ(entries.back().collective_seq_id, replay);
    ASSERT_EQ(entries.back().output_sizes.size(), 1u);
    EXPECT_EQ(entries.back().output_sizes[0], (Shape{6}));
  }
  EXPECT_EQ(pg.waits, 2);
  EXPECT_EQ(pg.last_wait_timeout.count(), 1234) << "each launch waited for under the collective's timeout";
  EXPECT_EQ(counted.calls, 2) << "each launch counts as a collective";
  EXPECT_EQ(counted.bytes, 2 * x.nbytes());
  EXPECT_EQ(fr->dump().groups[0].last_completed_collective, 2);

  // Uncaptured collectives share the seqs: the ranks' numbers stay one list.
  pg.all_reduce(x)->wait();
  EXPECT_EQ(pg.last_seq(), 3u);
  w->before_launch();
  EXPECT_EQ(cc->last_seq(), 4u);
  w->launched();
  w->finished(true);
}

TEST(CapturedCollective, AFailedLaunchRetiresItsEntryUncompleted) {
  auto fr = std::make_shared<FlightRecorder>(0);
  CapturingGroup pg(options(fr));
  Tensor x = floats(2);
  std::shared_ptr<CapturedWork> w =
      pg.enqueue_captured(pg.make_call(CollectiveOp::kAllReduce, &x), floats(2), Stream{});
  OpContext ctx;
  ctx.group = &pg;
  pg.wait_fails = true;
  w->before_launch();
  w->launched();
  Error e = error_of([&] { w->wait(ctx); });
  EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded) << e.message();
  EXPECT_NE(e.message().find("all_reduce"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("captured"), std::string::npos) << e.message();
  w->finished(false);
  auto entries = fr->dump().entries;
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_TRUE(entries[0].retired);
  EXPECT_NE(entries[0].state(), CollectiveState::kCompleted);

  // A broken group refuses the next launch before taking a seq.
  pg.broken = true;
  e = error_of([&] { w->before_launch(); });
  EXPECT_EQ(e.code(), ErrorCode::kUnavailable) << e.message();
  EXPECT_EQ(pg.last_seq(), 1u);
  w->finished(false);  // nothing recorded: a no-op
  EXPECT_EQ(fr->dump().entries.size(), 1u);
}

TEST(CapturedCollective, ValidOnlyInTheGroupAndStreamItWasCapturedIn) {
  auto fr = std::make_shared<FlightRecorder>(0);
  CapturingGroup pg(options(fr));
  CapturingGroup other(options(fr));
  Tensor x = floats(2);
  const Stream s{Device{DeviceType::kFake, 0}, 7};
  std::shared_ptr<CapturedWork> w = pg.enqueue_captured(pg.make_call(CollectiveOp::kAllReduce, &x), floats(2), s);
  OpContext ctx;
  ctx.stream = s;
  ctx.group = &pg;
  EXPECT_TRUE(w->valid_for(ctx));
  ctx.group = &other;
  EXPECT_FALSE(w->valid_for(ctx)) << "another group (a replaced one): capture again";
  ctx.group = nullptr;
  EXPECT_FALSE(w->valid_for(ctx));
  ctx.group = &pg;
  ctx.stream = Stream{Device{DeviceType::kFake, 0}, 8};
  EXPECT_FALSE(w->valid_for(ctx)) << "another stream";
  EXPECT_NE(pg.uid(), other.uid());
}

TEST(CapturedCollective, TheCaptureKeepsWhatTheBackendNeedsAliveUntilItGoes) {
  auto fr = std::make_shared<FlightRecorder>(0);
  auto pg = std::make_unique<CapturingGroup>(options(fr));
  std::weak_ptr<int> comm = pg->keep;
  Tensor x = floats(2);
  std::shared_ptr<CapturedWork> w =
      pg->enqueue_captured(pg->make_call(CollectiveOp::kAllReduce, &x), floats(2), Stream{});
  pg.reset();  // the group is replaced and destroyed; the graph lives on
  EXPECT_FALSE(comm.expired()) << "a captured graph must keep its communicator alive";
  w.reset();
  EXPECT_TRUE(comm.expired());
}

TEST(CapturedCollective, GlooRefusesToCaptureByName) {
  testing::Groups g = testing::make_groups(1);
  GlooProcessGroup& pg = g[0];
  EXPECT_FALSE(pg.supports_capture());
  Tensor x = floats(2);
  CollectiveCall call = pg.make_call(CollectiveOp::kAllReduce, &x);
  for (const auto& f : std::vector<std::function<void()>>{
           [&] { pg.prepare_captured(call, nullptr); },
           [&] { pg.enqueue_captured(call, floats(2), Stream{}); },
       }) {
    Error e = error_of(f);
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.message();
    EXPECT_NE(e.message().find("backend gloo cannot capture collectives"), std::string::npos) << e.message();
  }
  EXPECT_EQ(pg.last_seq(), 0u);
  // Its collectives run as before.
  auto w = pg.all_reduce(x);
  w->wait();
  EXPECT_EQ(pg.last_seq(), 1u);
}

}  // namespace
}  // namespace tensord::dist
