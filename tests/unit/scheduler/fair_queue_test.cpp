// FairQueue on a simulated device: jobs are durations on a ManualClock, so
// every test is deterministic and sleeps nowhere.
#include "scheduler/fair_queue.h"

#include <gtest/gtest.h>

#include <limits>

#include <map>
#include <queue>
#include <random>

#include "ops/error.h"
#include "scheduler/queue_full_error.h"

namespace tensord {
namespace {

using namespace std::chrono_literals;
using TimePoint = Clock::time_point;

QueuedJob make_job(uint64_t id, const std::string& tenant, TimePoint now, int priority = 0,
                   TimePoint deadline = TimePoint::max()) {
  QueuedJob j;
  j.id = id;
  j.tenant = tenant;
  j.priority = priority;
  j.enqueued = now;
  j.deadline = deadline;
  return j;
}

TenantSpec tenant(const std::string& name, const std::string& partition, double weight = 1, int max_queued = 64,
                  int max_running = 4) {
  return TenantSpec{name, partition, weight, max_queued, max_running};
}

// Checks the limits of every partition and tenant; called after each transition.
void check_limits(const FairQueue& q) {
  for (const auto& p : q.partitions()) {
    ASSERT_LE(q.inflight(p.name), q.limit(p.name)) << p.name;
    ASSERT_GE(q.inflight(p.name), 0) << p.name;
  }
  for (const auto& t : q.tenants()) {
    ASSERT_LE(q.running(t.name), t.max_running) << t.name;
    ASSERT_LE(q.queued(t.name), t.max_queued) << t.name;
  }
}

// A device that runs jobs for given durations: start() pops until the
// partition is full, advance() moves the clock to the next completion.
class SimDevice {
 public:
  explicit SimDevice(FairQueue& q) : q_(q) {}

  ManualClock clock;
  std::function<double(const QueuedJob&)> duration = [](const QueuedJob&) { return 0.001; };
  std::function<void(const QueuedJob&)> on_start = [](const QueuedJob&) {};
  std::function<void(const QueuedJob&)> on_finish = [](const QueuedJob&) {};

  void start_all() {
    for (const auto& p : q_.partitions()) {
      while (auto j = q_.pop(p.name, clock.now())) {
        check_limits(q_);
        const double d = duration(*j);
        running_.push(Running{clock.now() + to_dur(d), d, *j});
        on_start(*j);
      }
      // Work conserving: a partition below its limit has no eligible tenant.
      if (q_.inflight(p.name) < q_.limit(p.name)) {
        for (const auto& t : q_.tenants()) {
          if (t.partition == p.name) {
            ASSERT_TRUE(q_.queued(t.name) == 0 || q_.running(t.name) == t.max_running) << t.name;
          }
        }
      }
    }
  }
  // Finishes the earliest running job; false when nothing runs.
  bool finish_next() {
    if (running_.empty()) return false;
    Running r = running_.top();
    running_.pop();
    if (r.end > clock.now()) clock.set(r.end);
    q_.finished(r.job, clock.now(), r.seconds);
    check_limits(q_);
    on_finish(r.job);
    return true;
  }
  bool idle() const { return running_.empty(); }
  static std::chrono::steady_clock::duration to_dur(double s) {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
  }

 private:
  struct Running {
    TimePoint end;
    double seconds;
    QueuedJob job;
    bool operator<(const Running& o) const { return end > o.end || (end == o.end && job.id > o.job.id); }
  };
  FairQueue& q_;
  std::priority_queue<Running> running_;
};

TEST(FairQueue, RejectsBadConfig) {
  EXPECT_THROW(FairQueue({{"p", 1, 0}}, {}), Error);
  EXPECT_THROW(FairQueue({{"p", 1, 1}, {"p", 1, 1}}, {}), Error);
  EXPECT_THROW(FairQueue({{"p", 1, 1}}, {tenant("a", "nope")}), Error);
  EXPECT_THROW(FairQueue({{"p", 1, 1}}, {tenant("a", "p", 0)}), Error);
  EXPECT_THROW(FairQueue({{"p", 1, 1}}, {tenant("a", "p"), tenant("a", "p")}), Error);
}

TEST(FairQueue, UnknownTenantIsInternal) {
  FairQueue q({{"p", 1, 1}}, {tenant("a", "p")});
  try {
    q.push(make_job(1, "ghost", TimePoint{}));
    FAIL() << "accepted an unknown tenant";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
  }
  EXPECT_THROW(q.queued("ghost"), Error);
  EXPECT_THROW(q.pop("ghost", TimePoint{}), Error);
}

TEST(FairQueue, PriorityFirstThenFifoWithinTenant) {
  FairQueue q({{"p", 1, 1}}, {tenant("a", "p", 1, 64, 1)});
  TimePoint now{};
  int prio[] = {0, 5, 1, 5, 0, -3};
  for (uint64_t i = 0; i < 6; ++i) q.push(make_job(i + 1, "a", now, prio[i]));
  std::vector<uint64_t> order;
  while (auto j = q.pop("p", now)) {
    order.push_back(j->id);
    q.finished(*j, now, 0.001);
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{2, 4, 3, 1, 5, 6}));
}

// Every int is a priority (schemathesis sent INT_MIN, whose negation in
// int overflowed): the extremes order as any others.
TEST(FairQueue, ExtremePrioritiesOrderAsAnyOther) {
  FairQueue q({{"p", 1, 1}}, {tenant("a", "p", 1, 64, 1)});
  TimePoint now{};
  const int prio[] = {std::numeric_limits<int>::min(), 0, std::numeric_limits<int>::max(),
                      std::numeric_limits<int>::min()};
  for (uint64_t i = 0; i < 4; ++i) q.push(make_job(i + 1, "a", now, prio[i]));
  std::vector<uint64_t> order;
  while (auto j = q.pop("p", now)) {
    order.push_back(j->id);
    q.finished(*j, now, 0.001);
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{3, 2, 1, 4}));
}

TEST(FairQueue, LimitsAndMaxRunning) {
  FairQueue q({{"p", 1, 3}}, {tenant("a", "p", 1, 64, 2), tenant("b", "p", 1, 64, 2)});
  TimePoint now{};
  for (uint64_t i = 0; i < 10; ++i) q.push(make_job(i + 1, i % 2 ? "b" : "a", now));
  std::vector<QueuedJob> started;
  while (auto j = q.pop("p", now)) started.push_back(*j);
  EXPECT_EQ(started.size(), 3u);
  EXPECT_EQ(q.inflight("p"), 3);
  EXPECT_EQ(q.running("a") + q.running("b"), 3);
  EXPECT_EQ(q.queue_depth("p"), 7);
  q.finished(started[0], now, 0.5);
  EXPECT_EQ(q.inflight("p"), 2);
  ASSERT_TRUE(q.pop("p", now));
  EXPECT_FALSE(q.pop("p", now));
}

TEST(FairQueue, QueueFullWithRetryAfterFromDrainRate) {
  FairQueue q({{"p", 1, 1}}, {tenant("a", "p", 1, 4, 1)});
  ManualClock clock;
  uint64_t id = 1;
  for (; id <= 4; ++id) q.push(make_job(id, "a", clock.now()));
  // Unknown drain rate: 1 job/s assumed, 4 queued -> 4 s.
  try {
    q.push(make_job(id, "a", clock.now()));
    FAIL() << "no queue_full";
  } catch (const QueueFullError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kQueueFull);
    EXPECT_EQ(e.retry_after_seconds(), 4);
  }
  // Drain at 4 jobs/s while backlogged: 4 queued -> 1 s.
  for (int k = 0; k < 20; ++k) {
    auto j = q.pop("p", clock.now());
    ASSERT_TRUE(j);
    clock.advance(250ms);
    q.finished(*j, clock.now(), 0.25);
    q.push(make_job(id++, "a", clock.now()));
  }
  EXPECT_NEAR(q.drain_rate("a"), 4.0, 1e-6);
  EXPECT_EQ(q.queued("a"), 4);
  EXPECT_EQ(q.retry_after_seconds("a"), 1);
  // Slow drain (one job per 40 s): clamped to 60.
  for (int k = 0; k < 40; ++k) {
    auto j = q.pop("p", clock.now());
    ASSERT_TRUE(j);
    clock.advance(40s);
    q.finished(*j, clock.now(), 40);
    q.push(make_job(id++, "a", clock.now()));
  }
  EXPECT_EQ(q.retry_after_seconds("a"), 60);
  try {
    q.push(make_job(id, "a", clock.now()));
    FAIL() << "no queue_full";
  } catch (const QueueFullError& e) {
    EXPECT_GE(e.retry_after_seconds(), 1);
    EXPECT_LE(e.retry_after_seconds(), 60);
  }
}

TEST(FairQueue, IdleGapsDoNotSlowTheDrainRate) {
  FairQueue q({{"p", 1, 1}}, {tenant("a", "p", 1, 4, 1)});
  ManualClock clock;
  for (uint64_t id = 1; id <= 10; ++id) {
    q.push(make_job(id, "a", clock.now()));
    auto j = q.pop("p", clock.now());
    clock.advance(100ms);
    q.finished(*j, clock.now(), 0.1);
    clock.advance(1h);  // idle
  }
  EXPECT_NEAR(q.drain_rate("a"), 10.0, 1e-6);
}

TEST(FairQueue, CancelQueuedButNotRunning) {
  FairQueue q({{"p", 1, 1}}, {tenant("a", "p")});
  TimePoint now{};
  q.push(make_job(1, "a", now));
  q.push(make_job(2, "a", now));
  auto running = q.pop("p", now);
  ASSERT_TRUE(running);
  EXPECT_EQ(running->id, 1u);
  EXPECT_TRUE(q.is_running(1));
  EXPECT_FALSE(q.cancel(1)) << "running jobs are cancelled by their own flag";
  auto c = q.cancel(2);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->id, 2u);
  EXPECT_FALSE(q.cancel(2));
  EXPECT_FALSE(q.cancel(99));
  EXPECT_EQ(q.queued("a"), 0);
  q.finished(*running, now, 0.1);
  EXPECT_FALSE(q.cancel(1));
  EXPECT_THROW(q.finished(*running, now, 0.1), Error) << "finished twice";
}

TEST(FairQueue, ExpireRemovesOnlyDueQueuedJobs) {
  FairQueue q({{"p", 1, 1}}, {tenant("a", "p")});
  ManualClock clock;
  const TimePoint t0 = clock.now();
  q.push(make_job(1, "a", t0, 0, t0 + 5ms));  // starts, so never expires from the queue
  q.push(make_job(2, "a", t0, 0, t0 + 20ms));
  q.push(make_job(3, "a", t0, 0, t0 + 10ms));
  q.push(make_job(4, "a", t0));
  auto running = q.pop("p", t0);
  ASSERT_EQ(running->id, 1u);
  EXPECT_EQ(q.next_deadline(), t0 + 10ms);
  clock.advance(9ms);
  EXPECT_TRUE(q.expire(clock.now()).empty());
  clock.advance(1ms);
  auto e = q.expire(clock.now());
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].id, 3u);
  clock.advance(1h);
  e = q.expire(clock.now());
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].id, 2u);
  EXPECT_FALSE(q.next_deadline());
  EXPECT_EQ(q.queued("a"), 1);
  auto d = q.drain();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].id, 4u);
  EXPECT_EQ(q.queue_depth("p"), 0);
}

TEST(FairQueue, BusyTimeAccounting) {
  FairQueue q({{"p", 1, 2}, {"r", 1, 1}}, {tenant("a", "p"), tenant("b", "p"), tenant("c", "r")});
  TimePoint now{};
  q.push(make_job(1, "a", now));
  q.push(make_job(2, "b", now));
  q.push(make_job(3, "c", now));
  auto j1 = q.pop("p", now), j2 = q.pop("p", now), j3 = q.pop("r", now);
  q.finished(*j1, now, 1.5);
  q.finished(*j2, now, 0.5);
  q.finished(*j3, now, 2.0);
  EXPECT_DOUBLE_EQ(q.busy_seconds(j1->tenant), 1.5);
  EXPECT_DOUBLE_EQ(q.busy_seconds(j2->tenant), 0.5);
  EXPECT_DOUBLE_EQ(q.busy_seconds("c"), 2.0);
  EXPECT_DOUBLE_EQ(q.partition_busy_seconds("p"), 2.0);
  EXPECT_DOUBLE_EQ(q.partition_busy_seconds("r"), 2.0);
  EXPECT_EQ(q.completed("a"), 1);
  EXPECT_EQ(q.partition_of("c"), "r");
}

// Many tenants over several partitions, random arrivals, sizes, priorities,
// cancellations and deadlines: the limits hold after every transition.
TEST(FairQueue, RandomizedLoadNeverExceedsLimits) {
  std::vector<PartitionSpec> parts = {{"p0", 0.25, 1}, {"p1", 0.25, 3}, {"p2", 0.5, 8}};
  std::vector<TenantSpec> tenants;
  std::mt19937 rng(12345);
  for (int i = 0; i < 30; ++i) {
    tenants.push_back(tenant("t" + std::to_string(i), parts[i % 3].name, 1 + rng() % 8, 1 + rng() % 10,
                             1 + static_cast<int>(rng() % 4)));
  }
  FairQueue q(parts, tenants);
  SimDevice dev(q);
  std::uniform_real_distribution<double> size(0.0001, 0.01);
  dev.duration = [&](const QueuedJob&) { return size(rng); };
  std::map<uint64_t, int> state;  // 1 queued, 2 running, 3 done/removed
  dev.on_start = [&](const QueuedJob& j) {
    ASSERT_EQ(state[j.id], 1);
    ASSERT_LT(dev.clock.now(), j.deadline) << "an expired job started";
    state[j.id] = 2;
  };
  dev.on_finish = [&](const QueuedJob& j) { state[j.id] = 3; };
  uint64_t next_id = 1;
  int full = 0, cancelled = 0, expired = 0, done_before = 0;
  for (int step = 0; step < 20000; ++step) {
    const int arrivals = static_cast<int>(rng() % 4);
    for (int a = 0; a < arrivals; ++a) {
      const auto& t = tenants[rng() % tenants.size()];
      const TimePoint dl =
          rng() % 4 == 0 ? dev.clock.now() + std::chrono::microseconds(rng() % 20000) : TimePoint::max();
      try {
        q.push(make_job(next_id, t.name, dev.clock.now(), static_cast<int>(rng() % 3), dl));
        state[next_id] = 1;
      } catch (const QueueFullError& e) {
        ++full;
        ASSERT_GE(e.retry_after_seconds(), 1);
        ASSERT_LE(e.retry_after_seconds(), 60);
      }
      ++next_id;
      check_limits(q);
    }
    if (rng() % 10 == 0) {
      const uint64_t victim = 1 + rng() % next_id;
      auto c = q.cancel(victim);
      if (c) {
        ASSERT_EQ(state[victim], 1);
        state[victim] = 3;
        ++cancelled;
      } else {
        ASSERT_NE(state[victim], 1) << "a queued job could not be cancelled";
      }
      check_limits(q);
    }
    for (const auto& j : q.expire(dev.clock.now())) {
      ASSERT_EQ(state[j.id], 1);
      ASSERT_LE(j.deadline, dev.clock.now());
      state[j.id] = 3;
      ++expired;
    }
    ASSERT_NO_FATAL_FAILURE(dev.start_all());
    if (!dev.finish_next()) dev.clock.advance(1ms);
    ++done_before;
  }
  while (dev.finish_next()) {
    for (const auto& j : q.expire(dev.clock.now())) state[j.id] = 3;  // pop() leaves deadlines to expire()
    ASSERT_NO_FATAL_FAILURE(dev.start_all());
  }
  EXPECT_GT(full, 0);
  EXPECT_GT(cancelled, 0);
  EXPECT_GT(expired, 0);
  for (const auto& p : parts) EXPECT_EQ(q.inflight(p.name), 0);
}

// Runs backlogged tenants on one partition and returns each tenant's busy
// seconds over the run.
std::map<std::string, double> run_backlogged(const std::vector<TenantSpec>& tenants, int limit,
                                             const std::map<std::string, double>& job_seconds, int jobs) {
  FairQueue q({{"p", 1, limit}}, tenants);
  SimDevice dev(q);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  dev.duration = [&](const QueuedJob& j) { return job_seconds.at(j.tenant) * jitter(rng); };
  uint64_t id = 1;
  auto refill = [&] {
    for (const auto& t : tenants) {
      while (q.queued(t.name) < t.max_queued) q.push(make_job(id++, t.name, dev.clock.now()));
    }
  };
  for (int n = 0; n < jobs; ++n) {
    refill();
    dev.start_all();
    dev.finish_next();
  }
  std::map<std::string, double> busy;
  for (const auto& t : tenants) busy[t.name] = q.busy_seconds(t.name);
  return busy;
}

void expect_shares(const std::map<std::string, double>& busy, const std::map<std::string, double>& weights) {
  double total_busy = 0, total_w = 0;
  for (const auto& [n, b] : busy) total_busy += b;
  for (const auto& [n, w] : weights) total_w += w;
  for (const auto& [n, w] : weights) {
    const double want = w / total_w, got = busy.at(n) / total_busy;
    EXPECT_NEAR(got, want, 0.1 * want) << n << ": busy share " << got << ", weight share " << want;
  }
}

TEST(FairQueue, BackloggedSharesFollowWeights) {
  std::vector<TenantSpec> ts = {tenant("w1", "p", 1, 8, 8), tenant("w2", "p", 2, 8, 8), tenant("w4", "p", 4, 8, 8)};
  auto busy = run_backlogged(ts, 4, {{"w1", 0.002}, {"w2", 0.002}, {"w4", 0.002}}, 20000);
  expect_shares(busy, {{"w1", 1}, {"w2", 2}, {"w4", 4}});
}

TEST(FairQueue, SharesHoldForUnequalJobSizes) {
  // The light tenant sends jobs 8x longer than the heavy one: charging
  // measured run time (not job counts) keeps busy time at the weights.
  std::vector<TenantSpec> ts = {tenant("w1", "p", 1, 8, 8), tenant("w2", "p", 2, 8, 8), tenant("w4", "p", 4, 8, 8)};
  auto busy = run_backlogged(ts, 3, {{"w1", 0.008}, {"w2", 0.003}, {"w4", 0.001}}, 30000);
  expect_shares(busy, {{"w1", 1}, {"w2", 2}, {"w4", 4}});
}

TEST(FairQueue, SharesHoldOnALimitOnePartition) {
  std::vector<TenantSpec> ts = {tenant("w1", "p", 1, 4, 1), tenant("w2", "p", 2, 4, 1), tenant("w4", "p", 4, 4, 1)};
  auto busy = run_backlogged(ts, 1, {{"w1", 0.001}, {"w2", 0.004}, {"w4", 0.002}}, 20000);
  expect_shares(busy, {{"w1", 1}, {"w2", 2}, {"w4", 4}});
}

TEST(FairQueue, WeightOneTenantIsNeverStarved) {
  std::vector<TenantSpec> ts = {tenant("small", "p", 1, 8, 8)};
  double total_w = 1;
  for (int i = 0; i < 6; ++i) {
    ts.push_back(tenant("heavy" + std::to_string(i), "p", 16, 8, 8));
    total_w += 16;
  }
  FairQueue q({{"p", 1, 2}}, ts);
  SimDevice dev(q);
  dev.duration = [](const QueuedJob&) { return 0.001; };
  int since_small = 0, worst_gap = 0, small_starts = 0;
  double worst_wait = 0;
  dev.on_start = [&](const QueuedJob& j) {
    if (j.tenant == "small") {
      ++small_starts;
      worst_gap = std::max(worst_gap, since_small);
      since_small = 0;
      worst_wait = std::max(worst_wait, seconds_between(j.enqueued, dev.clock.now()));
    } else {
      ++since_small;
    }
  };
  uint64_t id = 1;
  // The small tenant keeps one job queued; the heavy ones stay backlogged.
  for (int n = 0; n < 20000; ++n) {
    for (const auto& t : ts) {
      const int64_t want = t.name == "small" ? 1 : t.max_queued;
      while (q.queued(t.name) < want) q.push(make_job(id++, t.name, dev.clock.now()));
    }
    ASSERT_NO_FATAL_FAILURE(dev.start_all());
    dev.finish_next();
  }
  EXPECT_GT(small_starts, 0);
  // Between two of its starts, about total_w / 1 other jobs start.
  EXPECT_LE(worst_gap, static_cast<int>(total_w * 1.5)) << "starts of others between two small-tenant starts";
  // Its wait is bounded by that many 1 ms jobs on 2 slots (plus its own).
  EXPECT_LE(worst_wait, total_w * 1.5 * 0.001 / 2 + 0.002);
}

TEST(FairQueue, IdleTenantBanksNoCredit) {
  FairQueue q({{"p", 1, 1}}, {tenant("a", "p", 1, 8, 1), tenant("b", "p", 1, 8, 1)});
  SimDevice dev(q);
  dev.duration = [](const QueuedJob&) { return 0.001; };
  uint64_t id = 1;
  // a runs alone for a long time.
  for (int n = 0; n < 1000; ++n) {
    while (q.queued("a") < 8) q.push(make_job(id++, "a", dev.clock.now()));
    dev.start_all();
    dev.finish_next();
  }
  // b arrives: it shares with a from now on instead of running alone for
  // the 1000 jobs a ran before.
  std::map<std::string, int> starts;
  dev.on_start = [&](const QueuedJob& j) { ++starts[j.tenant]; };
  for (int n = 0; n < 100; ++n) {
    while (q.queued("a") < 8) q.push(make_job(id++, "a", dev.clock.now()));
    while (q.queued("b") < 8) q.push(make_job(id++, "b", dev.clock.now()));
    dev.start_all();
    dev.finish_next();
  }
  EXPECT_NEAR(starts["a"], 50, 3);
  EXPECT_NEAR(starts["b"], 50, 3);
}

}  // namespace
}  // namespace tensord
