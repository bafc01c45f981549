#include "scheduler/job_table.h"

#include <gtest/gtest.h>

#include <thread>

namespace tensord {
namespace {

TEST(Job, StateMachine) {
  Job j("j1", "t", "p");
  EXPECT_EQ(j.state(), JobState::kQueued);
  EXPECT_TRUE(j.start());
  EXPECT_FALSE(j.start());
  EXPECT_EQ(j.state(), JobState::kRunning);
  JobResult r;
  r.id = "j1";
  j.succeed(r);
  EXPECT_EQ(j.state(), JobState::kSucceeded);
  j.fail(Error(ErrorCode::kInternal, "late"));  // ignored: already ended
  EXPECT_EQ(j.state(), JobState::kSucceeded);
  EXPECT_FALSE(j.error());
  ASSERT_TRUE(j.result());
  EXPECT_EQ(j.wait(), JobState::kSucceeded);
}

TEST(Job, CancelWhileQueuedWinsOverStart) {
  Job j("j2", "t", "p");
  j.request_cancel();
  EXPECT_TRUE(j.cancel_flag().load());
  j.fail(Error(ErrorCode::kCancelled, "bye"));
  EXPECT_EQ(j.state(), JobState::kCancelled);
  EXPECT_FALSE(j.start());
  EXPECT_EQ(j.error()->code(), ErrorCode::kCancelled);
  EXPECT_EQ(job_state_name(j.state()), "cancelled");
}

TEST(Job, WaitWakesOnOtherThread) {
  auto j = std::make_shared<Job>("j3", "t", "p");
  std::thread th([j] {
    j->start();
    j->fail(Error(ErrorCode::kNumericalError, "nan", "n1"));
  });
  EXPECT_EQ(j->wait(), JobState::kFailed);
  th.join();
  EXPECT_EQ(j->error()->node(), "n1");
  EXPECT_GE(j->run_ms(), 0.0);
}

TEST(JobTable, TenantIsolationAndRetentionBound) {
  JobTable table(std::chrono::seconds(600), 3);
  for (int i = 0; i < 6; ++i) {
    auto j = std::make_shared<Job>("a" + std::to_string(i), "alice", "p");
    table.add(j);
    j->start();
    j->succeed(JobResult{});
  }
  auto live = std::make_shared<Job>("live", "alice", "p");
  table.add(live);
  auto bobs = std::make_shared<Job>("b0", "bob", "p");
  table.add(bobs);
  EXPECT_EQ(table.find("bob", "a5"), nullptr) << "another tenant's job is not visible";
  EXPECT_NE(table.find("bob", "b0"), nullptr);
  EXPECT_NE(table.find("alice", "live"), nullptr) << "live jobs are never dropped";
  EXPECT_EQ(table.find("alice", "a0"), nullptr) << "oldest finished dropped past the bound";
  EXPECT_NE(table.find("alice", "a5"), nullptr);
  EXPECT_LE(table.size(), 3u + 2u);
}

TEST(JobTable, FinishedJobsExpire) {
  JobTable table(std::chrono::seconds(0), 100);
  auto j = std::make_shared<Job>("x", "t", "p");
  table.add(j);
  j->start();
  j->fail(Error(ErrorCode::kInternal, "x"));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(table.find("t", "x"), nullptr);
}

}  // namespace
}  // namespace tensord
