// SerialGate (graphs/serial_gate.h): one admitted at a time, the waiting
// ones admitted in order by release(), on the releasing thread.
#include "graphs/serial_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace tensord {
namespace {

TEST(SerialGate, AdmitsOneAtATimeInOrder) {
  SerialGate g;
  std::vector<int> admitted;
  EXPECT_TRUE(g.enter([] { FAIL() << "admitted at once: never called"; }));
  EXPECT_FALSE(g.enter([&] { admitted.push_back(1); }));
  EXPECT_FALSE(g.enter([&] { admitted.push_back(2); }));
  EXPECT_EQ(g.waiting(), 2u);
  g.release();  // the first holder is done: 1 is admitted
  EXPECT_EQ(admitted, (std::vector<int>{1}));
  g.release();  // 1 is done: 2
  EXPECT_EQ(admitted, (std::vector<int>{1, 2}));
  g.release();  // 2 is done: open
  EXPECT_EQ(g.waiting(), 0u);
  EXPECT_TRUE(g.enter([] {}));
  g.release();
}

TEST(SerialGate, NeverTwoAdmittedFromManyThreads) {
  SerialGate g;
  std::atomic<int> inside{0}, most{0}, runs{0};
  // Admitted work runs on the thread that admitted it (the caller, or the
  // releasing thread for a queued one) and releases.
  auto work = [&] {
    const int now = ++inside;
    int m = most.load();
    while (now > m && !most.compare_exchange_weak(m, now)) {
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    --inside;
    ++runs;
    g.release();
  };
  std::vector<std::thread> callers;
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&] {
      for (int k = 0; k < 20; ++k) {
        if (g.enter(work)) work();
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int i = 0; i < 2000 && runs.load() < 160; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(runs.load(), 160);
  EXPECT_EQ(most.load(), 1);
  EXPECT_EQ(g.waiting(), 0u);
}

}  // namespace
}  // namespace tensord
