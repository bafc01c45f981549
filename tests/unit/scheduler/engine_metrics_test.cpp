#include "scheduler/engine_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <string>
#include <thread>
#include <vector>

#include "metrics/metrics.h"
#include "scheduler/scheduler_types.h"

namespace tensord {
namespace {

// The series of `family` whose labels include all of `want`, or nullptr. The
// registry is process-wide: tests use label values no other test uses.
const prometheus::ClientMetric* find_series(const std::vector<prometheus::MetricFamily>& families,
                                            const std::string& family,
                                            const std::vector<std::pair<std::string, std::string>>& want) {
  for (const auto& f : families) {
    if (f.name != family) continue;
    for (const auto& m : f.metric) {
      size_t hits = 0;
      for (const auto& [k, v] : want) {
        for (const auto& l : m.label) hits += l.name == k && l.value == v;
      }
      if (hits == want.size()) return &m;
    }
  }
  return nullptr;
}

TEST(EngineMetrics, DisabledRecordsNothing) {
  EngineMetrics m("cpu", false);
  EXPECT_FALSE(m.enabled());
  // Every entry point is a no-op (the families were never looked up: a call
  // that touched them would dereference null).
  m.job_finished("off-tenant", "off-part", "succeeded", 0.1, 0.2);
  m.op_ran("off-op", 0.001);
  m.queue_depth("off-tenant", "off-part", 3);
  m.inflight("off-part", 1, 2);
  m.tenant_memory("off-tenant", 10, 20);
  m.device_memory("off-device", 10, 20);
  m.graph_replayed("off-tenant", "succeeded");
  m.graph_captured("off-tenant", 1);
  m.tenant_registered("off-tenant");
  JobEvent e;
  e.tenant = "off-tenant";
  e.partition = "off-part";
  m.on_event(e);
  std::string text = render_metrics();
  EXPECT_EQ(text.find("off-tenant"), std::string::npos) << text;
  EXPECT_EQ(text.find("off-op"), std::string::npos) << text;
  EXPECT_EQ(text.find("off-device"), std::string::npos) << text;
}

TEST(EngineMetrics, OpLaunchesCountedFromManyThreads) {
  EngineMetrics m("cpu");
  ASSERT_TRUE(m.enabled());
  constexpr int kThreads = 4, kPerThread = 2500;
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&m] {
      for (int k = 0; k < kPerThread; ++k) m.op_ran("em-test-op", 0.0005);
    });
  }
  for (auto& t : ts) t.join();
  auto fams = metrics_registry().Collect();
  const auto* c = find_series(fams, "tensord_op_launches_total", {{"op", "em-test-op"}, {"backend", "cpu"}});
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->counter.value, kThreads * kPerThread);
  const auto* h = find_series(fams, "tensord_op_seconds", {{"op", "em-test-op"}});
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->histogram.sample_count, static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_NEAR(h->histogram.sample_sum, kThreads * kPerThread * 0.0005, 1e-6);
}

TEST(EngineMetrics, ThreadCacheFollowsTheInstance) {
  // Two instances with different backend labels on one thread: each launch
  // goes to its own instance's series (the thread-local cache is per instance).
  EngineMetrics a("em-backend-a"), b("em-backend-b");
  for (int i = 0; i < 3; ++i) {
    a.op_ran("em-switch-op", 0.001);
    b.op_ran("em-switch-op", 0.001);
    b.op_ran("em-switch-op", 0.001);
  }
  auto fams = metrics_registry().Collect();
  const auto* ca =
      find_series(fams, "tensord_op_launches_total", {{"op", "em-switch-op"}, {"backend", "em-backend-a"}});
  const auto* cb =
      find_series(fams, "tensord_op_launches_total", {{"op", "em-switch-op"}, {"backend", "em-backend-b"}});
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(cb, nullptr);
  EXPECT_EQ(ca->counter.value, 3);
  EXPECT_EQ(cb->counter.value, 6);
}

TEST(EngineMetrics, JobSeriesByState) {
  EngineMetrics m("cpu");
  m.job_finished("em-tenant", "em-part", "succeeded", 0.001, 0.5);
  m.job_finished("em-tenant", "em-part", "succeeded", 0.002, 0.25);
  m.job_finished("em-tenant", "em-part", "failed", 0.003, 0.0);
  auto fams = metrics_registry().Collect();
  const auto* ok = find_series(fams, "tensord_jobs_total",
                               {{"tenant", "em-tenant"}, {"partition", "em-part"}, {"state", "succeeded"}});
  const auto* bad =
      find_series(fams, "tensord_jobs_total", {{"tenant", "em-tenant"}, {"partition", "em-part"}, {"state", "failed"}});
  ASSERT_NE(ok, nullptr);
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(ok->counter.value, 2);
  EXPECT_EQ(bad->counter.value, 1);
  const auto* run = find_series(fams, "tensord_job_run_seconds", {{"tenant", "em-tenant"}, {"partition", "em-part"}});
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(run->histogram.sample_count, 3u);
  EXPECT_NEAR(run->histogram.sample_sum, 0.75, 1e-9);
  const auto* busy =
      find_series(fams, "tensord_tenant_busy_seconds_total", {{"tenant", "em-tenant"}, {"partition", "em-part"}});
  ASSERT_NE(busy, nullptr);
  EXPECT_NEAR(busy->counter.value, 0.75, 1e-9);
}

TEST(EngineMetrics, EventsDriveDepthAndInflight) {
  EngineMetrics m("cpu");
  auto ev = [&](JobEvent::Kind k, uint64_t id) {
    JobEvent e;
    e.kind = k;
    e.id = id;
    e.tenant = "em-ev-tenant";
    e.partition = "em-ev-part";
    m.on_event(e);
  };
  auto depth = [] {
    auto fams = metrics_registry().Collect();
    const auto* d = find_series(fams, "tensord_queue_depth", {{"tenant", "em-ev-tenant"}, {"partition", "em-ev-part"}});
    const auto* r = find_series(fams, "tensord_partition_inflight", {{"partition", "em-ev-part"}});
    return std::make_pair(d ? d->gauge.value : -1, r ? r->gauge.value : -1);
  };
  ev(JobEvent::Kind::kQueued, 1);
  ev(JobEvent::Kind::kQueued, 2);
  EXPECT_EQ(depth(), std::make_pair(2.0, 0.0));
  ev(JobEvent::Kind::kStarted, 1);
  EXPECT_EQ(depth(), std::make_pair(1.0, 1.0));
  ev(JobEvent::Kind::kFailed, 2);  // left the queue without running
  EXPECT_EQ(depth(), std::make_pair(0.0, 1.0));
  ev(JobEvent::Kind::kFinished, 1);
  EXPECT_EQ(depth(), std::make_pair(0.0, 0.0));
}

TEST(EngineMetrics, MemoryGaugesCachedPerTenantAndDevice) {
  EngineMetrics m("cpu");
  m.tenant_memory("em-mem-tenant", 100, 1000);
  m.tenant_memory("em-mem-tenant", 40, 1000);
  m.device_memory("em-dev:0", 7, 70);
  m.device_memory("em-dev:0", 8, 70);
  auto fams = metrics_registry().Collect();
  const auto* used = find_series(fams, "tensord_tenant_memory_bytes", {{"tenant", "em-mem-tenant"}});
  const auto* lim = find_series(fams, "tensord_tenant_memory_limit_bytes", {{"tenant", "em-mem-tenant"}});
  const auto* du = find_series(fams, "tensord_device_memory_bytes", {{"device", "em-dev:0"}, {"kind", "used"}});
  const auto* dt = find_series(fams, "tensord_device_memory_bytes", {{"device", "em-dev:0"}, {"kind", "total"}});
  ASSERT_TRUE(used && lim && du && dt);
  EXPECT_EQ(used->gauge.value, 40);
  EXPECT_EQ(lim->gauge.value, 1000);
  EXPECT_EQ(du->gauge.value, 8);
  EXPECT_EQ(dt->gauge.value, 70);
}

}  // namespace
}  // namespace tensord
