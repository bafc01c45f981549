// CollectiveWorker: calls run one at a time in queue order on one thread,
// each Work finishes with what the call returned or fails with what it
// threw, and what is still queued fails when the owner aborts or stops.
#include "ops/dist/collective_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace tensord::dist {
namespace {

using std::chrono::milliseconds;

CollectiveWorker::Task task(uint64_t seq) {
  CollectiveCall c;
  c.op = CollectiveOp::kBarrier;
  c.seq = seq;
  return {c, std::make_shared<Work>("world", CollectiveOp::kBarrier, seq, nullptr, 0), false};
}

Error refused(const CollectiveCall& c) {
  return Error(ErrorCode::kCancelled, "refused seq " + std::to_string(c.seq));
}

// The Work's error code once it finished; none when it succeeded.
std::optional<ErrorCode> code_of(Work& w) {
  try {
    w.wait(milliseconds(5000));
  } catch (const Error& e) {
    return e.code();
  }
  return std::nullopt;
}
constexpr std::nullopt_t kSucceeded = std::nullopt;

// A gate the running call waits at, so a test decides when it ends.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  bool entered = false;
  void enter_and_wait() {
    std::unique_lock lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
  }
  void wait_entered() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  void release() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(CollectiveWorker, RunsCallsInQueueOrderOnOneThread) {
  std::vector<uint64_t> order;
  std::thread::id runner;
  bool one_thread = true;
  std::thread::id started_on;
  CollectiveWorker w;
  w.start(
      [&](const CollectiveWorker::Task& t) {
        if (runner == std::thread::id()) runner = std::this_thread::get_id();
        one_thread = one_thread && runner == std::this_thread::get_id();
        order.push_back(t.call.seq);
        if (t.call.seq == 3) throw Error(ErrorCode::kShapeMismatch, "rank 1 disagrees");
        return std::vector<Tensor>{};
      },
      [&] { started_on = std::this_thread::get_id(); });
  std::vector<CollectiveWorker::Task> tasks;
  for (uint64_t s = 1; s <= 5; ++s) {
    tasks.push_back(task(s));
    ASSERT_TRUE(w.push(tasks.back()));
  }
  EXPECT_EQ(code_of(*tasks[4].work), kSucceeded);
  EXPECT_EQ(code_of(*tasks[2].work), ErrorCode::kShapeMismatch) << "a throw fails that Work only";
  EXPECT_EQ(code_of(*tasks[3].work), kSucceeded);
  w.stop(refused);
  EXPECT_EQ(order, (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_TRUE(one_thread);
  EXPECT_EQ(started_on, runner) << "on_start runs on the worker's thread";
  EXPECT_NE(runner, std::this_thread::get_id());
}

TEST(CollectiveWorker, FailQueuedLeavesTheRunningCallAndLaterOnes) {
  Gate gate;
  CollectiveWorker w;
  w.start([&](const CollectiveWorker::Task& t) {
    if (t.call.seq == 1) gate.enter_and_wait();
    return std::vector<Tensor>{};
  });
  auto running = task(1), queued = task(2);
  ASSERT_TRUE(w.push(running));
  gate.wait_entered();
  ASSERT_TRUE(w.push(queued));
  w.fail_queued(refused);
  EXPECT_EQ(code_of(*queued.work), ErrorCode::kCancelled);
  auto later = task(3);
  ASSERT_TRUE(w.push(later)) << "an abort refuses what was queued, not the worker";
  gate.release();
  EXPECT_EQ(code_of(*running.work), kSucceeded);
  EXPECT_EQ(code_of(*later.work), kSucceeded);
  w.stop(refused);
}

TEST(CollectiveWorker, StopFailsTheQueueInterruptsAndWaitsForTheRunningCall) {
  Gate gate;
  std::atomic<bool> finished{false};
  CollectiveWorker w;
  w.start([&](const CollectiveWorker::Task&) {
    gate.enter_and_wait();
    finished = true;
    return std::vector<Tensor>{};
  });
  auto running = task(1), queued = task(2);
  ASSERT_TRUE(w.push(running));
  gate.wait_entered();
  ASSERT_TRUE(w.push(queued));
  bool interrupted = false;
  w.stop(refused, [&] {
    interrupted = true;
    gate.release();
  });
  EXPECT_TRUE(interrupted);
  EXPECT_TRUE(finished) << "stop returns after the running call";
  EXPECT_EQ(code_of(*running.work), kSucceeded);
  try {
    queued.work->wait(milliseconds(100));
    ADD_FAILURE() << "the queued call ran after stop";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCancelled);
    EXPECT_EQ(e.message(), "refused seq 2");
  }
  EXPECT_FALSE(w.push(task(3))) << "a stopped worker queues nothing";
  w.stop(refused);  // idempotent
}

}  // namespace
}  // namespace tensord::dist
