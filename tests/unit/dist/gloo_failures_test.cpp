// What goes wrong across ranks fails by name, quickly, on every rank that
// is there: mismatched shapes, dtypes or ops, a rank that never arrives or
// never joins, an unsupported dtype or op. Never a hang (every test is
// bounded by the watchdog of on_ranks and short collective timeouts).
#include <gtest/gtest.h>

#include "dist_test_util.h"

namespace tensord::dist {
namespace {

using namespace testing;
using Clock = std::chrono::steady_clock;

std::chrono::milliseconds since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
}

TEST(GlooFailures, MismatchedShapesFailOnEveryRankAndTheGroupGoesOn) {
  const int R = 3;
  Groups g = make_groups(R, 2000ms);
  on_ranks(R, [&](int r) {
    const int64_t n = r == 1 ? 5 : 4;
    const auto t0 = Clock::now();
    auto w = g[r].all_reduce(make<float>({n}, std::vector<float>(static_cast<size_t>(n), 1.f)));
    Error e = error_of([&] { w->wait(); });
    EXPECT_EQ(e.code(), ErrorCode::kShapeMismatch) << e.message();
    EXPECT_NE(e.message().find("float32[4]"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("float32[5]"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("seq 1"), std::string::npos) << e.message();
    EXPECT_LT(since(t0), 1000ms);
    // Nothing moved, nothing broke: the next collective runs.
    auto ok = g[r].all_reduce(make<float>({2}, {1.f, 2.f}));
    ok->wait();
    EXPECT_EQ(ok->seq(), 2u);
    EXPECT_EQ(values<float>(ok->result()), (std::vector<float>{3.f, 6.f}));
  });
}

TEST(GlooFailures, AllGatherMayDifferAlongDimOnly) {
  const int R = 2;
  Groups g = make_groups(R, 2000ms);
  on_ranks(R, [&](int r) {
    Shape s = r == 0 ? Shape{2, 3} : Shape{2, 4};  // differ along dim 1, gathered along 0
    auto w = g[r].all_gather(Tensor::zeros_host(DType::kInt32, s), 0);
    Error e = error_of([&] { w->wait(); });
    EXPECT_EQ(e.code(), ErrorCode::kShapeMismatch) << e.message();
    EXPECT_NE(e.message().find("along dim 0 only"), std::string::npos) << e.message();
  });
}

TEST(GlooFailures, MismatchedDtypesOrOpsAreNamed) {
  const int R = 2;
  Groups g = make_groups(R, 2000ms);
  on_ranks(R, [&](int r) {
    Tensor x = r == 0 ? make<float>({2}, {1, 2}) : make<double>({2}, {1, 2});
    Error e = error_of([&] { g[r].broadcast(x, 0)->wait(); });
    EXPECT_EQ(e.code(), ErrorCode::kDtypeMismatch) << e.message();
    EXPECT_NE(e.message().find("float64[2]"), std::string::npos) << e.message();

    Tensor y = make<float>({2}, {1, 2});
    auto w = r == 0 ? g[r].all_reduce(y) : g[r].broadcast(y, 0);
    e = error_of([&] { w->wait(); });
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.message();
    EXPECT_NE(e.message().find("runs all_reduce (seq 2)"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("runs broadcast (seq 2)"), std::string::npos) << e.message();

    e = error_of([&] { g[r].all_reduce(y, r == 0 ? ReduceOp::kSum : ReduceOp::kMax)->wait(); });
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.message();
    EXPECT_NE(e.message().find("op max"), std::string::npos) << e.message();
  });
}

TEST(GlooFailures, ARankThatNeverArrivesIsNamedWithinTheTimeout) {
  const int R = 3;
  Groups g = make_groups(R, 300ms);
  on_ranks(R, [&](int r) {
    if (r == 2) return;  // joined the group, never calls the collective
    const auto t0 = Clock::now();
    auto w = g[r].all_reduce(make<float>({4}, {1, 2, 3, 4}));
    Error e = error_of([&] { w->wait(); });
    EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded) << e.message();
    EXPECT_NE(e.message().find("gloo all_reduce (seq 1) in group world"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("ranks [2] had not arrived"), std::string::npos) << e.message();
    EXPECT_GE(since(t0), 250ms);
    EXPECT_LT(since(t0), 2000ms);
    // The flight recorder shows where this rank stopped.
    auto d = g.recorders[static_cast<size_t>(r)]->dump();
    ASSERT_EQ(d.entries.size(), 1u);
    EXPECT_EQ(d.entries[0].state(), CollectiveState::kStarted);
    EXPECT_TRUE(d.entries[0].retired);
    EXPECT_EQ(d.groups[0].last_started_collective, 1);
    EXPECT_EQ(d.groups[0].last_completed_collective, -1);
    // A timed-out group is broken: later collectives fail at once.
    e = error_of([&] { g[r].barrier()->wait(); });
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable) << e.message();
  });
  EXPECT_TRUE(g.recorders[2]->dump().entries.empty());
}

TEST(GlooFailures, ARankThatNeverJoinsFailsTheRendezvous) {
  const int R = 3;
  auto store = make_hash_store();
  on_ranks(2, [&](int r) {  // rank 2 never comes
    ProcessGroupOptions o;
    GlooOptions go;
    go.store = store;
    go.rendezvous_timeout = 300ms;
    const auto t0 = Clock::now();
    Error e = error_of([&] { GlooProcessGroup pg(r, R, o, go); });
    EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded) << e.message();
    EXPECT_NE(e.message().find("gloo group world: rank " + std::to_string(r) + " of 3"), std::string::npos)
        << e.message();
    EXPECT_LT(since(t0), 2000ms);
  });
}

TEST(GlooFailures, WaitWithATimeoutLeavesTheCollectiveRunning) {
  const int R = 2;
  Groups g = make_groups(R, 3000ms);
  on_ranks(R, [&](int r) {
    if (r == 1) std::this_thread::sleep_for(300ms);
    auto w = g[r].all_reduce(make<int64_t>({1}, {r + 1}));
    if (r == 0) {
      Error e = error_of([&] { w->wait(50ms); });
      EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded) << e.message();
      EXPECT_FALSE(w->is_completed());
    }
    w->wait();
    EXPECT_TRUE(w->is_success());
    EXPECT_EQ(values<int64_t>(w->result()), (std::vector<int64_t>{3}));
  });
}

TEST(GlooFailures, UnsupportedDtypesAndInvalidCallsFailByNameAndRecordNothing) {
  const int R = 2;
  Groups g = make_groups(R, 2000ms);
  on_ranks(R, [&](int r) {
    Error e = error_of([&] { g[r].all_reduce(Tensor::zeros_host(DType::kBFloat16, {4})); });
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(e.message(), "backend gloo does not support all_reduce with op sum on dtype bfloat16");
    e = error_of([&] { g[r].reduce_scatter(Tensor::zeros_host(DType::kComplex64, {4}), ReduceOp::kProd); });
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(e.message().find("complex64"), std::string::npos) << e.message();
    e = error_of([&] { g[r].broadcast(make<float>({1}, {1}), 2); });
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("src 2"), std::string::npos) << e.message();
    e = error_of([&] { g[r].reduce_scatter(make<float>({3}, {1, 2, 3})); });
    EXPECT_EQ(e.code(), ErrorCode::kShapeMismatch) << e.message();
    e = error_of([&] { g[r].all_to_all(make<float>({3}, {1, 2, 3}), 0, {1, 1}); });
    EXPECT_EQ(e.code(), ErrorCode::kShapeMismatch) << e.message();
    e = error_of([&] { g[r].all_gather(make<float>({3}, {1, 2, 3}), 1); });
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.message();
    EXPECT_EQ(g[r].last_seq(), 0u);
    EXPECT_TRUE(g.recorders[static_cast<size_t>(r)]->dump().entries.empty());
    // Data movement takes any dtype: bytes move as they are.
    auto w = g[r].all_gather(Tensor::zeros_host(DType::kBFloat16, {2}));
    w->wait();
    EXPECT_EQ(w->seq(), 1u);
    EXPECT_EQ(w->result().shape(), (Shape{4}));
  });
}

}  // namespace
}  // namespace tensord::dist
