#include "scheduler/engine_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <cmath>
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
  const std::string off_op = "off-op";
  OpMetrics::Batch ops;
  ops.add(off_op, 0.001);
  m.ops_ran(ops);
  EXPECT_TRUE(ops.empty());
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
  const std::string op = "em-test-op";
  constexpr int kThreads = 4, kPerThread = 2500;
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&m, &op] {
      OpMetrics::Batch ops;
      for (int k = 0; k < kPerThread; ++k) {
        ops.add(op, 0.0005);
        if (k % 97 == 0) m.ops_ran(ops);  // commits interleave with other threads'
      }
      m.ops_ran(ops);
    });
  }
  for (auto& t : ts) t.join();
  auto fams = collect_metrics();
  const auto* c = find_series(fams, "tensord_op_launches_total", {{"op", "em-test-op"}, {"backend", "cpu"}});
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->counter.value, kThreads * kPerThread);
  const auto* h = find_series(fams, "tensord_op_seconds", {{"op", "em-test-op"}});
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->histogram.sample_count, static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_NEAR(h->histogram.sample_sum, kThreads * kPerThread * 0.0005, 1e-6);
  // 0.0005 s falls in the le="0.0005" bucket (cumulative), not below it.
  ASSERT_EQ(h->histogram.bucket.size(), OpMetrics::kBuckets);
  for (const auto& b : h->histogram.bucket) {
    const uint64_t want = b.upper_bound >= 0.0005 ? kThreads * kPerThread : 0;
    EXPECT_EQ(b.cumulative_count, want) << "le=" << b.upper_bound;
  }
  EXPECT_TRUE(std::isinf(h->histogram.bucket.back().upper_bound));
}

TEST(EngineMetrics, BackendLabelPerInstance) {
  // Two instances with different backend labels: each launch goes to its
  // own instance's series; op_seconds (op label only) sums both.
  EngineMetrics a("em-backend-a"), b("em-backend-b");
  const std::string op = "em-switch-op";
  for (int i = 0; i < 3; ++i) {
    OpMetrics::Batch x, y;
    x.add(op, 0.001);
    y.add(op, 0.001);
    y.add(op, 0.001);
    a.ops_ran(x);
    b.ops_ran(y);
  }
  auto fams = collect_metrics();
  const auto* ca =
      find_series(fams, "tensord_op_launches_total", {{"op", "em-switch-op"}, {"backend", "em-backend-a"}});
  const auto* cb =
      find_series(fams, "tensord_op_launches_total", {{"op", "em-switch-op"}, {"backend", "em-backend-b"}});
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(cb, nullptr);
  EXPECT_EQ(ca->counter.value, 3);
  EXPECT_EQ(cb->counter.value, 6);
  const auto* h = find_series(fams, "tensord_op_seconds", {{"op", "em-switch-op"}});
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->histogram.sample_count, 9u);
}

TEST(EngineMetrics, EntriesCountUnderTheBackendThatRanThem) {
  // One engine (backend "em-device"): launches added with the backend whose
  // kernel ran count under it; those added without one under the engine's.
  EngineMetrics m("em-device");
  const std::string op = "em-ran-op";
  OpMetrics::Batch ops;
  ops.add(op, 0.001, "em-device");
  ops.add(op, 0.001, "cpu");
  ops.add(op, 0.001, std::string_view("cpu"));
  ops.add(op, 0.001);
  EXPECT_EQ(ops.ops(), 3u) << "(op, em-device), (op, cpu), (op, the engine's)";
  m.ops_ran(ops);
  EXPECT_TRUE(ops.empty());
  auto fams = collect_metrics();
  const auto* dev = find_series(fams, "tensord_op_launches_total", {{"op", "em-ran-op"}, {"backend", "em-device"}});
  const auto* cpu = find_series(fams, "tensord_op_launches_total", {{"op", "em-ran-op"}, {"backend", "cpu"}});
  ASSERT_NE(dev, nullptr);
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(dev->counter.value, 2);
  EXPECT_EQ(cpu->counter.value, 2);
  const auto* h = find_series(fams, "tensord_op_seconds", {{"op", "em-ran-op"}});
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->histogram.sample_count, 4u) << "op_seconds sums every backend";
}

TEST(OpMetrics, BucketsAreLessOrEqual) {
  EXPECT_EQ(OpMetrics::bucket_of(0.0), 0u);
  EXPECT_EQ(OpMetrics::bucket_of(0.00001), 0u);
  EXPECT_EQ(OpMetrics::bucket_of(0.0000100001), 1u);
  EXPECT_EQ(OpMetrics::bucket_of(300), OpMetrics::kBounds.size() - 1);
  EXPECT_EQ(OpMetrics::bucket_of(301), OpMetrics::kBounds.size());  // +Inf
}

TEST(OpMetrics, BatchGroupsByOpName) {
  // Two strings with the same text are one op; the batch keeps one entry each.
  const std::string a1 = "em-group-a", a2 = "em-group-a", b = "em-group-b";
  OpMetrics::Batch ops;
  ops.add(a1, 0.001);
  ops.add(a2, 0.002);
  ops.add(b, 0.003);
  EXPECT_EQ(ops.ops(), 2u);
  OpMetrics::global().commit("em-group-backend", ops);
  EXPECT_TRUE(ops.empty());
  auto fams = collect_metrics();
  const auto* c =
      find_series(fams, "tensord_op_launches_total", {{"op", "em-group-a"}, {"backend", "em-group-backend"}});
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->counter.value, 2);
  const auto* h = find_series(fams, "tensord_op_seconds", {{"op", "em-group-a"}});
  ASSERT_NE(h, nullptr);
  EXPECT_NEAR(h->histogram.sample_sum, 0.003, 1e-9);
}

TEST(EngineMetrics, JobSeriesByState) {
  EngineMetrics m("cpu");
  m.job_finished("em-tenant", "em-part", "succeeded", 0.001, 0.5);
  m.job_finished("em-tenant", "em-part", "succeeded", 0.002, 0.25);
  m.job_finished("em-tenant", "em-part", "failed", 0.003, 0.0);
  // Busy time comes from the engine while jobs run, not from their ends.
  m.tenant_busy("em-tenant", "em-part", 0.5);
  m.tenant_busy("em-tenant", "em-part", 0.25);
  m.tenant_busy("em-tenant", "em-part", 0.0);   // nothing
  m.tenant_busy("em-tenant", "em-part", -1.0);  // never negative
  auto fams = collect_metrics();
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
    auto fams = collect_metrics();
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
  auto fams = collect_metrics();
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
