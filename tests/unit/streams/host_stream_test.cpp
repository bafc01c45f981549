#include "streams/host_stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ops/error.h"

namespace tensord {
namespace {

TEST(HostStream, RunsEachThreadsTasksInEnqueueOrder) {
  HostStream s;
  std::vector<std::pair<int, int>> order;  // (thread, i), appended only by the draining thread
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) s.enqueue([&order, t, i] { order.emplace_back(t, i); });
    });
  }
  for (auto& t : threads) t.join();
  s.synchronize();
  ASSERT_EQ(order.size(), 800u);
  EXPECT_EQ(s.completed(), 800);
  std::vector<int> last(4, -1);
  for (auto [t, i] : order) {
    EXPECT_EQ(i, last[static_cast<size_t>(t)] + 1) << "thread " << t;
    last[static_cast<size_t>(t)] = i;
  }
}

TEST(HostStream, OneTaskAtATime) {
  HostStream s;
  std::atomic<int> running{0}, most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        s.enqueue([&] {
          int now = running.fetch_add(1) + 1;
          int m = most.load();
          while (now > m && !most.compare_exchange_weak(m, now)) {
          }
          running.fetch_sub(1);
        });
      }
    });
  }
  for (auto& t : threads) t.join();
  s.synchronize();
  EXPECT_EQ(most.load(), 1);
}

TEST(HostStream, EventWaitOrdersAcrossStreams) {
  auto a = std::make_shared<HostStream>();
  auto b = std::make_shared<HostStream>();
  std::latch release(1);
  std::atomic<bool> a_done{false};
  std::atomic<bool> b_saw_a{false};
  // A's task blocks on another thread until released.
  std::thread ta([&] {
    a->enqueue([&] {
      release.wait();
      a_done = true;
    });
  });
  while (a->record() < 1) std::this_thread::yield();
  int64_t ev = a->record();
  std::thread tb([&] {
    b->wait_event(a, ev);
    b->enqueue([&] { b_saw_a = a_done.load(); });
  });
  release.count_down();
  ta.join();
  tb.join();
  b->synchronize();
  EXPECT_TRUE(b_saw_a.load());
}

TEST(HostStream, SynchronizeRethrowsFirstErrorOnce) {
  HostStream s;
  int after = 0;
  s.enqueue([] { throw std::runtime_error("first"); });
  s.enqueue([] { throw std::runtime_error("second"); });
  s.enqueue([&] { ++after; });
  try {
    s.synchronize();
    FAIL() << "expected the task's error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "first");
  }
  EXPECT_EQ(after, 1);               // later tasks still ran
  EXPECT_NO_THROW(s.synchronize());  // reported once
}

TEST(HostStream, CaptureRecordsInsteadOfRunningAndReplays) {
  HostStream s;
  int runs = 0;
  EXPECT_FALSE(s.capturing());
  s.begin_capture();
  EXPECT_TRUE(s.capturing());
  s.enqueue([&] { runs += 1; });
  s.enqueue([&] { runs *= 10; });
  EXPECT_EQ(runs, 0);
  try {
    s.synchronize();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kConflict);
  }
  EXPECT_THROW(s.record(), Error);
  EXPECT_THROW(s.begin_capture(), Error);
  auto tasks = s.end_capture();
  EXPECT_FALSE(s.capturing());
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_THROW(s.end_capture(), Error);
  for (int i = 0; i < 3; ++i) {
    for (auto& t : tasks) s.enqueue(t);
  }
  s.synchronize();
  EXPECT_EQ(runs, 1110);  // ((1*10+1)*10+1)*10: order kept on every replay
}

}  // namespace
}  // namespace tensord
