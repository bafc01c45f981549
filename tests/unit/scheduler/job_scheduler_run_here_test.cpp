// JobScheduler::submit_or_run: a job that would start at once runs on the
// caller's thread, taking the slot a runner would; anything else is queued
// as by submit(). Real runner threads; waits are bounded so that a job left
// queued with no runner woken fails the test instead of hanging it.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "ops/cpu/thread_pool.h"
#include "scheduler/core_assignment.h"
#include "scheduler/job_scheduler.h"
#include "tests/unit/scheduler/sync_helpers.h"

namespace tensord {
namespace {

using namespace std::chrono_literals;
using testing_util::Gate;
constexpr Clock::time_point kNoDeadline = Clock::time_point::max();

TenantSpec tenant(const std::string& name, const std::string& partition, int max_running = 4) {
  return TenantSpec{name, partition, 1.0, 64, max_running};
}

JobScheduler::FailFn no_fail() {
  return [](const Error& e) { ADD_FAILURE() << "unexpected fail: " << e.message(); };
}

int all_cores() {
  return static_cast<int>(allowed_cpus().size());
}

// The events the observer saw, in order.
struct Events {
  std::mutex mu;
  std::vector<JobEvent::Kind> kinds;
  JobScheduler::Observer observer() {
    return [this](const JobEvent& e) {
      std::lock_guard<std::mutex> lk(mu);
      kinds.push_back(e.kind);
    };
  }
};

TEST(JobSchedulerRunHere, AnIdlePartitionRunsTheJobOnTheCallersThread) {
  Events ev;
  JobScheduler s({{"p", 1, 1}}, {tenant("a", "p")}, std::make_shared<SteadyClock>(), all_cores(), ev.observer());
  std::thread::id ran_on;
  bool ran = false;
  s.submit_or_run(
      "a", 0, kNoDeadline,
      [&](const PartitionContext& ctx) {
        ran_on = std::this_thread::get_id();
        ran = true;
        EXPECT_EQ(ctx.partition, "p");
        EXPECT_NE(ctx.pool, nullptr);
        EXPECT_EQ(s.stats().partitions[0].inflight, 1);  // it holds the partition's slot
      },
      no_fail());
  EXPECT_TRUE(ran);  // before submit_or_run returned
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  const auto st = s.stats();
  EXPECT_EQ(st.partitions[0].inflight, 0);
  EXPECT_EQ(st.tenants[0].completed, 1);
  std::lock_guard<std::mutex> lk(ev.mu);
  EXPECT_EQ(ev.kinds, (std::vector<JobEvent::Kind>{JobEvent::Kind::kQueued, JobEvent::Kind::kStarted,
                                                   JobEvent::Kind::kFinished}));
}

TEST(JobSchedulerRunHere, ABusySlotQueuesItForARunner) {
  JobScheduler s({{"p", 1, 1}}, {tenant("a", "p")}, std::make_shared<SteadyClock>(), all_cores());
  Gate gate;
  s.submit(
      "a", 0, kNoDeadline, [&](const PartitionContext&) { gate.wait(); }, no_fail());
  gate.wait_for_waiters(1);  // the only slot is taken
  std::promise<std::thread::id> ran_on;
  s.submit_or_run(
      "a", 0, kNoDeadline, [&](const PartitionContext&) { ran_on.set_value(std::this_thread::get_id()); }, no_fail());
  EXPECT_EQ(s.stats().partitions[0].queued, 1);  // queued, not run here
  gate.open();
  auto f = ran_on.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_NE(f.get(), std::this_thread::get_id());
}

TEST(JobSchedulerRunHere, AJobWaitingInThePartitionIsNotOvertaken) {
  // a may run one job at a time: its second waits in the queue while the
  // partition has a free slot. b's job then queues too (a runner starts it).
  JobScheduler s({{"p", 1, 2}}, {tenant("a", "p", 1), tenant("b", "p")}, std::make_shared<SteadyClock>(), all_cores());
  Gate gate;
  std::promise<void> a2;
  s.submit(
      "a", 0, kNoDeadline, [&](const PartitionContext&) { gate.wait(); }, no_fail());
  gate.wait_for_waiters(1);
  s.submit(
      "a", 0, kNoDeadline, [&](const PartitionContext&) { a2.set_value(); }, no_fail());
  ASSERT_EQ(s.stats().partitions[0].queued, 1);
  std::promise<std::thread::id> ran_on;
  s.submit_or_run(
      "b", 0, kNoDeadline, [&](const PartitionContext&) { ran_on.set_value(std::this_thread::get_id()); }, no_fail());
  auto f = ran_on.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_NE(f.get(), std::this_thread::get_id());
  gate.open();
  ASSERT_EQ(a2.get_future().wait_for(10s), std::future_status::ready);
}

TEST(JobSchedulerRunHere, AJobQueuedWhileItRanStartsAfterIt) {
  // The inline job takes the only slot; a job submitted meanwhile finds no
  // slot and waits; the end of the inline job must wake a runner for it.
  JobScheduler s({{"p", 1, 1}}, {tenant("a", "p")}, std::make_shared<SteadyClock>(), all_cores());
  std::promise<void> second;
  s.submit_or_run(
      "a", 0, kNoDeadline,
      [&](const PartitionContext&) {
        s.submit(
            "a", 0, kNoDeadline, [&](const PartitionContext&) { second.set_value(); }, no_fail());
      },
      no_fail());
  ASSERT_EQ(second.get_future().wait_for(10s), std::future_status::ready);
}

TEST(JobSchedulerRunHere, APassedDeadlineExpiresInsteadOfRunning) {
  auto clock = std::make_shared<ManualClock>();
  JobScheduler s({{"p", 1, 1}}, {tenant("a", "p")}, clock, all_cores());
  std::promise<ErrorCode> failed;
  const auto deadline = clock->now();
  clock->advance(1ms);
  s.submit_or_run(
      "a", 0, deadline, [&](const PartitionContext&) { ADD_FAILURE() << "ran past its deadline"; },
      [&](const Error& e) { failed.set_value(e.code()); });
  s.poll();
  auto f = failed.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), ErrorCode::kDeadlineExceeded);
}

TEST(JobSchedulerRunHere, OnlyAThreadOnThePartitionsCoresRunsIt) {
  if (all_cores() < 2) GTEST_SKIP() << "needs two CPUs to give two partitions cores of their own";
  JobScheduler s({{"p", 0.5, 1}, {"q", 0.5, 1}}, {tenant("a", "p")}, std::make_shared<SteadyClock>(), all_cores());
  // This thread may run on every core: not within p's.
  std::promise<std::thread::id> ran_on;
  s.submit_or_run(
      "a", 0, kNoDeadline, [&](const PartitionContext&) { ran_on.set_value(std::this_thread::get_id()); }, no_fail());
  auto f = ran_on.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_NE(f.get(), std::this_thread::get_id());
  // The runner frees p's one slot just after the job's function returns:
  // until then a new job queues (no free slot), as it should.
  const auto p_inflight = [&s] {
    for (const auto& p : s.stats().partitions) {
      if (p.name == "p") return p.inflight;
    }
    return -1;
  };
  for (int i = 0; i < 1000 && p_inflight() != 0; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(p_inflight(), 0);
  // A thread pinned to p's cores (a lane's) runs it itself.
  std::thread lane([&] {
    ASSERT_TRUE(pin_current_thread(s.cpus("p")));
    bool here = false;
    s.submit_or_run(
        "a", 0, kNoDeadline, [&](const PartitionContext&) { here = true; }, no_fail());
    EXPECT_TRUE(here);
  });
  lane.join();
}

}  // namespace
}  // namespace tensord
