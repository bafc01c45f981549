// JobScheduler with real runner threads. Time is a ManualClock except where
// the realtime timer thread itself is under test; tests wait on condition
// variables, never sleep.
#include "scheduler/job_scheduler.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "scheduler/core_assignment.h"
#include "scheduler/queue_full_error.h"
#include "tests/unit/scheduler/sync_helpers.h"

namespace tensord {
namespace {

using namespace std::chrono_literals;
using testing_util::Counter;
using testing_util::Gate;
using TimePoint = Clock::time_point;
constexpr TimePoint kNoDeadline = TimePoint::max();

// Records failure codes by job id.
struct Failures {
  std::mutex mu;
  std::map<int, ErrorCode> codes;
  Counter count;
  // `label` is the test's name for the job: fail may run before submit returns its id.
  JobScheduler::FailFn for_job(int label) {
    return [this, label](const Error& e) {
      {
        std::lock_guard<std::mutex> lk(mu);
        codes[label] = e.code();
      }
      count.add();
    };
  }
  std::optional<ErrorCode> code(int label) {
    std::lock_guard<std::mutex> lk(mu);
    auto it = codes.find(label);
    if (it == codes.end()) return std::nullopt;
    return it->second;
  }
};

TenantSpec tenant(const std::string& name, const std::string& partition, double weight = 1, int max_queued = 64,
                  int max_running = 4) {
  return TenantSpec{name, partition, weight, max_queued, max_running};
}

JobScheduler::FailFn no_fail() {
  return [](const Error& e) { ADD_FAILURE() << "unexpected fail: " << e.message(); };
}

TEST(JobScheduler, LimitOnePartitionRunsOneJobAtATime) {
  std::atomic<int> now_running{0}, most{0};
  Counter done;
  JobScheduler s({{"p", 1, 1}}, {tenant("a", "p"), tenant("b", "p", 2), tenant("c", "p", 4)},
                 std::make_shared<SteadyClock>(), 2);
  const int kJobs = 300;
  for (int i = 0; i < kJobs; ++i) {
    const char* t = i % 3 == 0 ? "a" : i % 3 == 1 ? "b" : "c";
    for (;;) {
      try {
        s.submit(
            t, 0, kNoDeadline,
            [&](const PartitionContext& ctx) {
              const int r = ++now_running;
              int m = most.load();
              while (r > m && !most.compare_exchange_weak(m, r)) {
              }
              // A little real work on the partition's pool.
              std::atomic<int64_t> sum{0};
              ctx.pool->parallel_for(64, 1, [&](int64_t b, int64_t e) { sum += e - b; });
              EXPECT_EQ(sum.load(), 64);
              --now_running;
              done.add();
            },
            no_fail());
        break;
      } catch (const QueueFullError&) {
        std::this_thread::yield();  // backpressure: the runner drains
      }
    }
  }
  done.wait_for(kJobs);
  EXPECT_EQ(most.load(), 1);
  s.shutdown();
  auto st = s.stats();
  EXPECT_EQ(st.partitions[0].inflight, 0);
  int64_t completed = 0;
  for (const auto& t : st.tenants) completed += t.completed;
  EXPECT_EQ(completed, kJobs);
}

TEST(JobScheduler, RunsUpToTheLimitAndNoMore) {
  auto clock = std::make_shared<ManualClock>();
  Gate gate;
  Counter done;
  JobScheduler s({{"p", 1, 3}}, {tenant("a", "p", 1, 64, 8), tenant("b", "p", 1, 64, 8)}, clock, 2);
  for (int i = 0; i < 8; ++i) {
    s.submit(
        i % 2 ? "a" : "b", 0, kNoDeadline,
        [&](const PartitionContext&) {
          gate.wait();
          done.add();
        },
        no_fail());
  }
  gate.wait_for_waiters(3);
  auto st = s.stats();
  EXPECT_EQ(st.partitions[0].inflight, 3);
  EXPECT_EQ(st.partitions[0].limit, 3);
  EXPECT_EQ(st.partitions[0].queued, 5);
  gate.open();
  done.wait_for(8);
}

TEST(JobScheduler, PoolsSizedByShareAndPinnedToDisjointCores) {
  // 4 logical cores: shares 0.5 / 0.25 / 0.25 -> 2, 1, 1 cores, disjoint.
  std::vector<PartitionSpec> parts = {{"big", 0.5, 2}, {"s1", 0.25, 1}, {"s2", 0.25, 1}};
  auto logical = assign_cores(parts, 4);
  EXPECT_EQ(logical, (std::vector<std::vector<int>>{{0, 1}, {2}, {3}}));
  // Fewer cores than partitions: they share round-robin, each gets one.
  EXPECT_EQ(assign_cores(parts, 2), (std::vector<std::vector<int>>{{0}, {1}, {0}}));
  EXPECT_EQ(assign_cores({{"x", 0.01, 1}}, 8), (std::vector<std::vector<int>>{{0}}));
  EXPECT_EQ(to_physical({0, 1, 2, 3}, {4, 6}), (std::vector<int>{4, 6}));

  auto clock = std::make_shared<ManualClock>();
  JobScheduler s(parts, {tenant("a", "big"), tenant("b", "s1"), tenant("c", "s2")}, clock, 4);
  EXPECT_EQ(s.pool("big").size(), 2);
  EXPECT_EQ(s.pool("s1").size(), 1);
  EXPECT_EQ(s.pool("s2").size(), 1);
  const auto allowed = allowed_cpus();
  EXPECT_EQ(s.cpus("big"), to_physical({0, 1}, allowed));
  EXPECT_EQ(s.cpus("s2"), to_physical({3}, allowed));
  EXPECT_EQ(s.pool("big").cpus(), s.cpus("big"));
  auto st = s.stats();
  ASSERT_EQ(st.partitions.size(), 3u);
  EXPECT_EQ(st.partitions[0].threads, 2);

  // The runner thread of s1 runs on s1's cores only.
  std::promise<std::vector<int>> where;
  s.submit(
      "b", 0, kNoDeadline,
      [&](const PartitionContext& ctx) {
        EXPECT_EQ(ctx.partition, "s1");
        EXPECT_EQ(ctx.pool, &s.pool("s1"));
        cpu_set_t set;
        CPU_ZERO(&set);
        std::vector<int> on;
        if (sched_getaffinity(0, sizeof(set), &set) == 0) {
          for (int c = 0; c < CPU_SETSIZE; ++c) {
            if (CPU_ISSET(c, &set)) on.push_back(c);
          }
        }
        where.set_value(on);
      },
      no_fail());
  EXPECT_EQ(where.get_future().get(), s.cpus("s1"));
}

TEST(JobScheduler, CancelQueuedJobButNotRunningOne) {
  auto clock = std::make_shared<ManualClock>();
  std::vector<JobEvent> events;
  std::mutex ev_mu;
  Gate gate;  // before the scheduler: its runners may still touch them while it stops
  Failures f;
  Counter done;
  JobScheduler s({{"p", 1, 1}}, {tenant("a", "p")}, clock, 1, [&](const JobEvent& e) {
    std::lock_guard<std::mutex> lk(ev_mu);
    events.push_back(e);
  });
  uint64_t id1 = 0, id2 = 0;
  id1 = s.submit(
      "a", 0, kNoDeadline,
      [&](const PartitionContext&) {
        gate.wait();
        done.add();
      },
      f.for_job(1));
  gate.wait_for_waiters(1);
  id2 = s.submit(
      "a", 0, kNoDeadline, [&](const PartitionContext&) { ADD_FAILURE() << "cancelled job ran"; }, f.for_job(2));
  EXPECT_FALSE(s.cancel(id1)) << "running";
  EXPECT_TRUE(s.cancel(id2));
  EXPECT_EQ(f.code(2), ErrorCode::kCancelled) << "fail is called before cancel returns";
  EXPECT_FALSE(s.cancel(id2)) << "already cancelled";
  EXPECT_FALSE(s.cancel(12345)) << "unknown";
  gate.open();
  done.wait_for(1);
  s.shutdown();
  EXPECT_FALSE(s.cancel(id1)) << "finished";
  EXPECT_FALSE(f.code(1));
  EXPECT_EQ(s.stats().tenants[0].cancelled, 1);
  std::lock_guard<std::mutex> lk(ev_mu);
  std::vector<std::pair<uint64_t, JobEvent::Kind>> seq;
  for (const auto& e : events) seq.emplace_back(e.id, e.kind);
  using K = JobEvent::Kind;
  EXPECT_EQ(seq,
            (std::vector<std::pair<uint64_t, K>>{
                {id1, K::kQueued}, {id1, K::kStarted}, {id2, K::kQueued}, {id2, K::kFailed}, {id1, K::kFinished}}));
  EXPECT_EQ(events[3].error, ErrorCode::kCancelled);
  EXPECT_EQ(events[0].partition, "p");
}

TEST(JobScheduler, QueuedDeadlineExpiresOnPollWithoutSleeping) {
  auto clock = std::make_shared<ManualClock>();
  Gate gate;
  Failures f;
  Counter done;
  JobScheduler s({{"p", 1, 1}}, {tenant("a", "p")}, clock, 1);
  TimePoint run_deadline{};
  s.submit(
      "a", 0, clock->now() + 1h,
      [&](const PartitionContext& ctx) {
        run_deadline = ctx.deadline;  // the executor checks it at node boundaries
        gate.wait();
        done.add();
      },
      f.for_job(1));
  gate.wait_for_waiters(1);
  s.submit(
      "a", 0, clock->now() + 5ms, [&](const PartitionContext&) { ADD_FAILURE() << "expired job ran"; }, f.for_job(2));
  s.submit(
      "a", 0, clock->now() + 50ms, [&](const PartitionContext&) { done.add(); }, f.for_job(3));
  EXPECT_EQ(s.poll(), 0u);
  clock->advance(4ms);
  EXPECT_EQ(s.poll(), 0u);
  clock->advance(1ms);
  EXPECT_EQ(s.poll(), 1u);
  EXPECT_EQ(f.code(2), ErrorCode::kDeadlineExceeded);
  EXPECT_FALSE(f.code(3));
  gate.open();
  done.wait_for(2);
  EXPECT_EQ(run_deadline, clock->now() - 5ms + 1h);
  EXPECT_FALSE(f.code(1));
  EXPECT_FALSE(f.code(3));
  EXPECT_EQ(s.stats().tenants[0].expired, 1);
}

TEST(JobScheduler, RunnerExpiresDueJobsBeforeStartingThem) {
  auto clock = std::make_shared<ManualClock>();
  Gate gate;
  Failures f;
  Counter done;
  JobScheduler s({{"p", 1, 1}}, {tenant("a", "p")}, clock, 1);
  s.submit(
      "a", 0, kNoDeadline,
      [&](const PartitionContext&) {
        gate.wait();
        done.add();
      },
      f.for_job(1));
  gate.wait_for_waiters(1);
  s.submit(
      "a", 0, clock->now() + 1ms, [&](const PartitionContext&) { ADD_FAILURE() << "expired job ran"; }, f.for_job(2));
  clock->advance(2ms);  // no poll(): the runner sees it when the slot frees
  gate.open();
  f.count.wait_for(1);
  EXPECT_EQ(f.code(2), ErrorCode::kDeadlineExceeded);
}

TEST(JobScheduler, RunningJobSeesItsDeadlineAndIsNotFailedByPoll) {
  // A running job's deadline is checked by the job at node boundaries (the
  // executor throws deadline_exceeded); the scheduler never fails it twice.
  auto clock = std::make_shared<ManualClock>();
  Gate gate;
  Failures f;
  Counter done;
  JobScheduler s({{"p", 1, 1}}, {tenant("a", "p")}, clock, 1);
  const TimePoint deadline = clock->now() + 1ms;
  s.submit(
      "a", 0, deadline,
      [&](const PartitionContext& ctx) {
        gate.wait();
        if (s.clock().now() >= ctx.deadline) throw Error(ErrorCode::kDeadlineExceeded, "at node n2");
        done.add();
      },
      f.for_job(1));
  gate.wait_for_waiters(1);
  clock->advance(2ms);
  EXPECT_EQ(s.poll(), 0u) << "running jobs are not expired by the scheduler";
  gate.open();
  f.count.wait_for(1);
  EXPECT_EQ(f.code(1), ErrorCode::kDeadlineExceeded);
  EXPECT_EQ(done.get(), 0);
  s.shutdown();
  EXPECT_EQ(s.stats().tenants[0].failed, 1);
  EXPECT_EQ(s.stats().tenants[0].expired, 0);
}

TEST(JobScheduler, RealtimeTimerExpiresQueuedJobs) {
  Gate gate;
  Failures f;
  JobScheduler s({{"p", 1, 1}}, {tenant("a", "p")}, std::make_shared<SteadyClock>(), 1);
  s.submit(
      "a", 0, kNoDeadline, [&](const PartitionContext&) { gate.wait(); }, f.for_job(1));
  gate.wait_for_waiters(1);
  s.submit(
      "a", 0, std::chrono::steady_clock::now() + 20ms,
      [&](const PartitionContext&) { ADD_FAILURE() << "expired job ran"; }, f.for_job(2));
  f.count.wait_for(1);  // the timer thread wakes at the deadline
  EXPECT_EQ(f.code(2), ErrorCode::kDeadlineExceeded);
  gate.open();
}

TEST(JobScheduler, PrioritiesWithinATenant) {
  auto clock = std::make_shared<ManualClock>();
  Gate gate;
  Counter done;
  std::mutex mu;
  std::vector<int> order;
  JobScheduler s({{"p", 1, 1}}, {tenant("a", "p", 1, 64, 1)}, clock, 1);
  s.submit(
      "a", 0, kNoDeadline, [&](const PartitionContext&) { gate.wait(); }, no_fail());
  gate.wait_for_waiters(1);
  for (int prio : {0, 7, 3, 7, -1}) {
    s.submit(
        "a", prio, kNoDeadline,
        [&, prio](const PartitionContext&) {
          {
            std::lock_guard<std::mutex> lk(mu);
            order.push_back(prio);
          }
          done.add();
        },
        no_fail());
  }
  gate.open();
  done.wait_for(5);
  std::lock_guard<std::mutex> lk(mu);
  EXPECT_EQ(order, (std::vector<int>{7, 7, 3, 0, -1}));
}

TEST(JobScheduler, QueueFullIsSynchronousWithRetryAfter) {
  auto clock = std::make_shared<ManualClock>();
  Gate gate;
  Counter done;
  JobScheduler s({{"p", 1, 1}}, {tenant("a", "p", 1, 2, 1), tenant("b", "p", 1, 2, 1)}, clock, 1);
  s.submit(
      "a", 0, kNoDeadline,
      [&](const PartitionContext&) {
        gate.wait();
        done.add();
      },
      no_fail());
  gate.wait_for_waiters(1);
  s.submit(
      "a", 0, kNoDeadline, [&](const PartitionContext&) { done.add(); }, no_fail());
  s.submit(
      "a", 0, kNoDeadline, [&](const PartitionContext&) { done.add(); }, no_fail());
  try {
    s.submit(
        "a", 0, kNoDeadline, [&](const PartitionContext&) { done.add(); }, no_fail());
    ADD_FAILURE() << "no queue_full";
  } catch (const QueueFullError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kQueueFull);
    EXPECT_GE(e.retry_after_seconds(), 1);
    EXPECT_LE(e.retry_after_seconds(), 60);
  }
  EXPECT_NO_THROW(s.submit(
      "b", 0, kNoDeadline, [&](const PartitionContext&) { done.add(); }, no_fail()))
      << "per tenant";
  try {
    s.submit(
        "ghost", 0, kNoDeadline, [&](const PartitionContext&) { done.add(); }, no_fail());
    ADD_FAILURE() << "unknown tenant accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
  }
  EXPECT_EQ(s.stats().tenants[0].rejected, 1);
  gate.open();
  done.wait_for(4);  // else the destructor's shutdown fails the queued ones
}

TEST(JobScheduler, ShutdownFailsQueuedJobsAndWaitsForRunning) {
  auto clock = std::make_shared<ManualClock>();
  Gate gate;
  Failures f;
  std::atomic<int> finished{0};
  JobScheduler s({{"p", 1, 1}, {"q", 1, 2}}, {tenant("a", "p"), tenant("b", "q")}, clock, 2);
  s.submit(
      "a", 0, kNoDeadline,
      [&](const PartitionContext&) {
        gate.wait();
        ++finished;
      },
      f.for_job(1));
  gate.wait_for_waiters(1);
  for (int i = 0; i < 4; ++i) {
    s.submit(
        "a", 0, clock->now() + 1h, [](const PartitionContext&) { ADD_FAILURE() << "ran after shutdown"; },
        f.for_job(100 + i));
  }
  std::thread stopper([&] { s.shutdown(); });
  f.count.wait_for(4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(f.code(100 + i), ErrorCode::kUnavailable);
  EXPECT_EQ(finished.load(), 0) << "the running job is still running";
  gate.open();
  stopper.join();
  EXPECT_EQ(finished.load(), 1) << "shutdown waited for it";
  EXPECT_FALSE(f.code(1));
  try {
    s.submit(
        "b", 0, kNoDeadline, [](const PartitionContext&) {}, no_fail());
    ADD_FAILURE() << "accepted after shutdown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
  }
  s.shutdown();  // idempotent
}

TEST(JobScheduler, RunThrowingDoesNotKillTheRunner) {
  auto clock = std::make_shared<ManualClock>();
  Failures f;
  Counter ok;
  JobScheduler s({{"p", 1, 1}}, {tenant("a", "p")}, clock, 1);
  s.submit(
      "a", 0, kNoDeadline, [](const PartitionContext&) { throw std::runtime_error("boom"); }, f.for_job(1));
  s.submit(
      "a", 0, kNoDeadline, [](const PartitionContext&) { throw Error(ErrorCode::kNumericalError, "nan"); },
      f.for_job(2));
  s.submit(
      "a", 0, kNoDeadline, [](const PartitionContext&) { throw 42; }, f.for_job(3));
  s.submit(
      "a", 0, kNoDeadline, [&](const PartitionContext&) { ok.add(); }, no_fail());
  ok.wait_for(1);
  f.count.wait_for(3);
  EXPECT_EQ(f.code(1), ErrorCode::kInternal);
  EXPECT_EQ(f.code(2), ErrorCode::kNumericalError);
  EXPECT_EQ(f.code(3), ErrorCode::kInternal);
  s.shutdown();
  EXPECT_EQ(s.stats().tenants[0].failed, 3);
  EXPECT_EQ(s.stats().tenants[0].completed, 4);
}

TEST(JobScheduler, BusyTimeFromTheInjectedClock) {
  auto clock = std::make_shared<ManualClock>();
  Counter done;
  JobScheduler s({{"p", 1, 1}}, {tenant("a", "p"), tenant("b", "p")}, clock, 1);
  s.submit(
      "a", 0, kNoDeadline,
      [&](const PartitionContext&) {
        clock->advance(250ms);  // the "device" time of this job
        done.add();
      },
      no_fail());
  done.wait_for(1);
  s.shutdown();
  auto st = s.stats();
  EXPECT_DOUBLE_EQ(st.tenants[0].busy_seconds, 0.25);
  EXPECT_DOUBLE_EQ(st.tenants[1].busy_seconds, 0);
  EXPECT_DOUBLE_EQ(st.partitions[0].busy_seconds, 0.25);
}

// Many submitter threads, many tenants on several partitions, random
// cancels: the observer sees every transition in order (it runs under the
// scheduler lock) and checks the limits at each one.
TEST(JobScheduler, RandomizedThreadedLoadKeepsLimits) {
  std::vector<PartitionSpec> parts = {{"p0", 0.25, 1}, {"p1", 0.25, 2}, {"p2", 0.5, 4}};
  std::vector<TenantSpec> tenants;
  for (int i = 0; i < 12; ++i) {
    tenants.push_back(tenant("t" + std::to_string(i), parts[i % 3].name, 1 + i % 4, 8, 1 + i % 3));
  }
  std::mutex mu;  // guards the counts below (observer and checks)
  std::map<std::string, int> inflight, running;
  std::map<std::string, int> limit, max_running;
  for (const auto& p : parts) limit[p.name] = p.workqueue_limit;
  for (const auto& t : tenants) max_running[t.name] = t.max_running;
  std::set<uint64_t> started;
  int violations = 0, transitions = 0;
  auto observer = [&](const JobEvent& e) {
    std::lock_guard<std::mutex> lk(mu);
    ++transitions;
    if (e.kind == JobEvent::Kind::kStarted) {
      ++inflight[e.partition];
      ++running[e.tenant];
      started.insert(e.id);
    } else if (e.kind != JobEvent::Kind::kQueued && started.erase(e.id)) {
      --inflight[e.partition];
      --running[e.tenant];
    }
    if (inflight[e.partition] > limit[e.partition] || running[e.tenant] > max_running[e.tenant]) ++violations;
  };
  std::atomic<int> ran{0}, failed{0}, rejected{0};
  std::vector<std::thread> submitters;
  JobScheduler s(parts, tenants, std::make_shared<SteadyClock>(), 2, observer);
  for (int th = 0; th < 4; ++th) {
    submitters.emplace_back([&, th] {
      std::mt19937 rng(th);
      for (int i = 0; i < 300; ++i) {
        const auto& t = tenants[rng() % tenants.size()];
        const TimePoint dl =
            rng() % 5 == 0 ? std::chrono::steady_clock::now() + std::chrono::microseconds(rng() % 2000) : kNoDeadline;
        try {
          uint64_t id = s.submit(
              t.name, static_cast<int>(rng() % 3), dl,
              [&](const PartitionContext& ctx) {
                std::atomic<int64_t> sum{0};
                ctx.pool->parallel_for(256, 16, [&](int64_t b, int64_t e) { sum += e - b; });
                ++ran;
              },
              [&](const Error&) { ++failed; });
          if (rng() % 4 == 0) s.cancel(id);
        } catch (const QueueFullError&) {
          ++rejected;
          std::this_thread::yield();
        }
        if (i % 50 == 0) (void)s.stats();
      }
    });
  }
  for (auto& t : submitters) t.join();
  // Let the queues drain before shutting down (on a loaded machine the
  // runners may not have started yet), so that some jobs surely ran.
  for (int spin = 0; spin < 2000; ++spin) {
    SchedulerStats st = s.stats();
    int64_t left = 0;
    for (const auto& p : st.partitions) left += p.queued + p.inflight;
    if (left == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  s.shutdown();
  std::lock_guard<std::mutex> lk(mu);
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(ran + failed + rejected, 4 * 300) << "every job ran, failed or was rejected, once";
  for (const auto& [p, n] : inflight) EXPECT_EQ(n, 0) << p;
  EXPECT_GT(ran.load(), 0);
  EXPECT_GT(transitions, 0);
}

}  // namespace
}  // namespace tensord
