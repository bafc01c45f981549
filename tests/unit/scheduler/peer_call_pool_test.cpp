#include "scheduler/spmd/peer_call_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>

namespace tensord {
namespace {

using namespace std::chrono_literals;

// Waits (bounded) until pred holds.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 5000ms) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(PeerCallPool, AStalledCallHoldsNoOther) {
  PeerCallPool pool;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> stalled_started{false};
  pool.post([&stalled_started, released] {
    stalled_started = true;
    released.wait();
  });
  ASSERT_TRUE(eventually([&] { return stalled_started.load(); }));
  std::promise<int> answer;
  pool.post([&answer] { answer.set_value(7); });
  auto f = answer.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "the second call waited behind the stalled one";
  EXPECT_EQ(f.get(), 7);
  EXPECT_EQ(pool.threads(), 2u);
  release.set_value();
}

TEST(PeerCallPool, ThreadsAreReusedOneCallAfterAnother) {
  PeerCallPool pool;
  std::thread::id first;
  for (int i = 0; i < 20; ++i) {
    std::promise<std::thread::id> ran;
    pool.post([&ran] { ran.set_value(std::this_thread::get_id()); });
    const auto id = ran.get_future().get();
    if (i == 0) first = id;
    // The thread goes back to idle just after the call returns (a call
    // posted before that gets a thread of its own, as it must).
    ASSERT_TRUE(eventually([&] { return pool.idle_threads() == 1u; }));
    EXPECT_EQ(pool.threads(), 1u);
    EXPECT_EQ(id, first) << "call " << i << " started a thread of its own";
  }
}

TEST(PeerCallPool, IdleThreadsEndAndNewCallsStillRun) {
  PeerCallPool pool(20ms);
  std::promise<void> ran;
  pool.post([&ran] { ran.set_value(); });
  ran.get_future().get();
  ASSERT_TRUE(eventually([&] { return pool.threads() == 0u; })) << "an idle thread outlived its idle time";
  std::promise<void> again;
  pool.post([&again] { again.set_value(); });
  EXPECT_EQ(again.get_future().wait_for(5s), std::future_status::ready);
}

TEST(PeerCallPool, DestroyingWaitsForCallsInFlightAndRunsQueuedOnes) {
  auto done = std::make_shared<std::atomic<int>>(0);
  {
    PeerCallPool pool;
    for (int i = 0; i < 8; ++i) {
      pool.post([done] {
        std::this_thread::sleep_for(20ms);
        ++*done;
      });
    }
  }
  EXPECT_EQ(done->load(), 8);
}

TEST(PeerCallPool, ACallThatThrowsLeavesThePoolWorking) {
  PeerCallPool pool;
  pool.post([] { throw std::runtime_error("peer gone"); });
  std::promise<void> ran;
  pool.post([&ran] { ran.set_value(); });
  EXPECT_EQ(ran.get_future().wait_for(5s), std::future_status::ready);
}

}  // namespace
}  // namespace tensord
