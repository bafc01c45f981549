#include "server/io_deadline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

namespace tensord {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Runs the handlers `ioc` has for `d`.
void run_for(net::io_context& ioc, Clock::duration d) {
  ioc.restart();
  ioc.run_for(d);
}

TEST(IoDeadline, FiresOnceWhenItPasses) {
  net::io_context ioc;
  int fired = 0;
  IoDeadline d(ioc.get_executor(), [&] { ++fired; });
  const auto t0 = Clock::now();
  Clock::time_point at{};
  IoDeadline timed(ioc.get_executor(), [&] { at = Clock::now(); });
  d.after(30ms);
  timed.after(30ms);
  run_for(ioc, 300ms);
  EXPECT_EQ(fired, 1);
  EXPECT_GE(at - t0, 30ms);
  EXPECT_LT(at - t0, 250ms);
}

TEST(IoDeadline, MovingItLaterArmsTheTimerOnlyWhenItFiresEarly) {
  net::io_context ioc;
  int fired = 0;
  IoDeadline d(ioc.get_executor(), [&] { ++fired; });
  // A busy connection: the deadline moves on every "request", 200 times.
  Clock::time_point last{};
  for (int i = 0; i < 20; ++i) {
    for (int k = 0; k < 10; ++k) d.after(60ms);
    last = Clock::now();
    run_for(ioc, 10ms);
  }
  EXPECT_EQ(fired, 0) << "never idle for 60 ms";
  EXPECT_LE(d.arms(), 8u) << "armed per firing, not per after()";
  run_for(ioc, 300ms);  // then idle: it passes, 60 ms after the last move
  EXPECT_EQ(fired, 1);
  EXPECT_GE(Clock::now() - last, 60ms);
}

TEST(IoDeadline, AnEarlierDeadlineTakesTheTimerBackAndNeverStopsIt) {
  net::io_context ioc;
  Clock::time_point at{};
  IoDeadline d(ioc.get_executor(), [&] { at = Clock::now(); });
  const auto t0 = Clock::now();
  d.after(10s);
  d.after(20ms);  // earlier: re-armed
  run_for(ioc, 500ms);
  ASSERT_NE(at, Clock::time_point{}) << "the earlier deadline was kept";
  EXPECT_LT(at - t0, 400ms);

  int fired = 0;
  IoDeadline n(ioc.get_executor(), [&] { ++fired; });
  n.after(20ms);
  n.never();
  run_for(ioc, 100ms);
  EXPECT_EQ(fired, 0) << "never() drops the deadline";
  n.after(20ms);
  run_for(ioc, 200ms);
  EXPECT_EQ(fired, 1) << "and after() sets a new one";
}

TEST(IoDeadline, DestroyedWithAWaitPendingItNeverCallsBack) {
  net::io_context ioc;
  int fired = 0;
  auto d = std::make_unique<IoDeadline>(ioc.get_executor(), [&] { ++fired; });
  d->after(10ms);
  d.reset();
  run_for(ioc, 100ms);
  EXPECT_EQ(fired, 0);
}

}  // namespace
}  // namespace tensord
