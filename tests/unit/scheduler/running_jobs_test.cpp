#include "scheduler/running_jobs.h"

#include <gtest/gtest.h>

#include <map>

#include "scheduler/job.h"

namespace tensord {
namespace {

using Clock = RunningJobs::Clock;

TEST(RunningJobs, BusyTimeIsCountedOnceWhetherFlushedOrNot) {
  RunningJobs r;
  auto a = std::make_shared<Job>("a", "alice", "p");
  auto b = std::make_shared<Job>("b", "bob", "p");
  const auto t0 = Clock::now();
  r.add(a, t0);
  r.add(b, t0 + std::chrono::seconds(1));
  std::map<std::string, double> busy;
  r.flush_busy(t0 + std::chrono::seconds(3), [&](const std::string& t, const std::string& p, double s) {
    EXPECT_EQ(p, "p");
    busy[t] += s;
  });
  EXPECT_DOUBLE_EQ(busy["alice"], 3.0);
  EXPECT_DOUBLE_EQ(busy["bob"], 2.0);
  // The rest at the end: only what the flush did not count.
  EXPECT_DOUBLE_EQ(r.remove(*a, t0 + std::chrono::milliseconds(3500)), 0.5);
  EXPECT_DOUBLE_EQ(r.remove(*a, t0 + std::chrono::seconds(9)), 0.0) << "gone: nothing more";
  EXPECT_EQ(r.size(), 1u);
  // A flush at an earlier time than the last counts nothing (no negative time).
  r.flush_busy(t0 + std::chrono::seconds(2), [&](const std::string&, const std::string&, double) { ADD_FAILURE(); });
  EXPECT_DOUBLE_EQ(r.remove(*b, t0 + std::chrono::seconds(4)), 1.0);
}

TEST(RunningJobs, CancelAllNamesTheReason) {
  RunningJobs r;
  auto a = std::make_shared<Job>("a", "alice", "p");
  r.add(a, Clock::now());
  EXPECT_EQ(r.cancel_all(Error(ErrorCode::kUnavailable, "draining")), 1u);
  EXPECT_TRUE(a->cancel_flag().load());
  ASSERT_TRUE(a->cancel_reason());
  EXPECT_EQ(a->cancel_reason()->code(), ErrorCode::kUnavailable);
  r.cancel_all(Error(ErrorCode::kInternal, "later"));
  EXPECT_EQ(a->cancel_reason()->code(), ErrorCode::kUnavailable) << "the first reason wins";
}

}  // namespace
}  // namespace tensord
