// Config reload (SIGHUP): what plan_reload applies and refuses, the tenant
// registry's snapshot swap (tokens, retired tenants, kept usage), and the
// scheduler's reconfigure under queued and running jobs. No sleeps: jobs
// block on gates, time is a ManualClock.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "ops/error.h"
#include "scheduler/config_reload.h"
#include "scheduler/fair_queue.h"
#include "scheduler/job_scheduler.h"
#include "scheduler/queue_full_error.h"
#include "scheduler/tenant_registry.h"
#include "tests/unit/scheduler/sync_helpers.h"

namespace tensord {
namespace {

constexpr Clock::time_point kNoDeadline = Clock::time_point::max();

std::string tok(char c) {
  return std::string(64, c);
}

TenantSpec tenant_cfg(const std::string& name, const std::string& partition, char token, int max_queued = 8) {
  TenantSpec t;
  t.name = name;
  t.partition = partition;
  t.token_sha256 = tok(token);
  t.max_queued = max_queued;
  return t;
}

ServerConfig base_config() {
  ServerConfig c;
  c.partitions = {{"interactive", 0.25, 2}, {"batch", 0.75, 4}};
  c.tenants = {tenant_cfg("alice", "interactive", 'a'), tenant_cfg("bob", "batch", 'b')};
  return c;
}

std::map<std::string, std::string> known_of(const ServerConfig& c) {
  std::map<std::string, std::string> out;
  for (const auto& t : c.tenants) out[t.name] = t.partition;
  return out;
}

bool mentions(const std::vector<std::string>& notes, const std::string& what) {
  for (const auto& n : notes) {
    if (n.find(what) != std::string::npos) return true;
  }
  return false;
}

// ---- plan_reload ----

TEST(PlanReload, AppliesTenantsAndLimitsKeepsLayout) {
  ServerConfig running = base_config();
  ServerConfig next = running;
  next.partitions = {{"interactive", 0.5, 7}, {"extra", 0.25, 1}};  // share changed, batch gone, extra new
  next.tenants = {tenant_cfg("alice", "interactive", 'c', 3), tenant_cfg("carol", "interactive", 'd')};
  ReloadPlan plan = plan_reload(running, next, known_of(running));
  ASSERT_EQ(plan.effective.partitions.size(), 2u);
  EXPECT_EQ(plan.effective.partitions[0].name, "interactive");
  EXPECT_EQ(plan.effective.partitions[0].share, 0.25);         // share kept
  EXPECT_EQ(plan.effective.partitions[0].workqueue_limit, 7);  // limit applied
  EXPECT_EQ(plan.effective.partitions[1].name, "batch");       // kept though gone from the file
  EXPECT_EQ(plan.effective.partitions[1].workqueue_limit, 4);
  ASSERT_EQ(plan.effective.tenants.size(), 2u);
  EXPECT_EQ(plan.effective.tenants[0].max_queued, 3);
  EXPECT_EQ(plan.effective.tenants[0].token_sha256, tok('c'));
  EXPECT_EQ(plan.effective.tenants[1].name, "carol");
  EXPECT_TRUE(mentions(plan.notes, "share 0.5 not applied"));
  EXPECT_TRUE(mentions(plan.notes, "'batch' is gone"));
  EXPECT_TRUE(mentions(plan.notes, "'extra' not added"));
  EXPECT_EQ(plan.notes.size(), 3u);
}

TEST(PlanReload, UnchangedFileHasNoNotes) {
  ServerConfig running = base_config();
  ReloadPlan plan = plan_reload(running, running, known_of(running));
  EXPECT_TRUE(plan.notes.empty());
  EXPECT_EQ(plan.effective.tenants.size(), 2u);
}

TEST(PlanReload, InvalidFileIsRefused) {
  ServerConfig running = base_config();
  ServerConfig dup = running;
  dup.tenants.push_back(tenant_cfg("alice", "batch", 'z'));
  EXPECT_THROW(plan_reload(running, dup, known_of(running)), Error);
  ServerConfig over = running;
  over.partitions[0].share = 0.9;  // sums over 1
  try {
    plan_reload(running, over, known_of(running));
    FAIL() << "shares over 1 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
    EXPECT_NE(e.message().find("sum"), std::string::npos) << e.message();
  }
  ServerConfig empty;
  EXPECT_THROW(plan_reload(running, empty, known_of(running)), Error);
}

TEST(PlanReload, NewTenantOnNewPartitionIsRefused) {
  ServerConfig running = base_config();
  ServerConfig next = running;
  next.partitions.push_back({"gpu2", 0.0001, 1});
  next.partitions[1].share = 0.7;
  next.tenants.push_back(tenant_cfg("dave", "gpu2", 'e'));
  try {
    plan_reload(running, next, known_of(running));
    FAIL() << "a tenant on a partition the layout lacks was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("not in the running layout"), std::string::npos) << e.message();
  }
}

TEST(PlanReload, TenantStaysOnItsPartition) {
  ServerConfig running = base_config();
  ServerConfig next = running;
  next.tenants[0].partition = "batch";  // alice would move
  ReloadPlan plan = plan_reload(running, next, known_of(running));
  EXPECT_EQ(plan.effective.tenants[0].partition, "interactive");
  EXPECT_TRUE(mentions(plan.notes, "stays on partition 'interactive'"));
  // A retired tenant coming back also keeps its old partition.
  auto known = known_of(running);
  known["zed"] = "batch";
  next = running;
  next.tenants.push_back(tenant_cfg("zed", "interactive", 'f'));
  plan = plan_reload(running, next, known);
  EXPECT_EQ(plan.effective.tenants[2].partition, "batch");
}

TEST(PlanReload, AnonymousServerCannotReload) {
  EXPECT_THROW(plan_reload(default_config(2), base_config(), {}), Error);
}

// ---- TenantRegistry::reload ----

TEST(TenantRegistryReload, TokensSwapAndUsageSurvives) {
  TenantRegistry reg(base_config());
  Tenant* alice = reg.by_token_hash(tok('a'));
  ASSERT_NE(alice, nullptr);
  Tensor x = Tensor::empty_host(DType::kFloat32, {4});
  alice->store.put("w", x);
  const int64_t used = alice->account->used();
  EXPECT_GT(used, 0);

  ServerConfig next = base_config();
  next.tenants[0].token_sha256 = tok('c');  // alice's token rotated
  next.tenants[0].memory_bytes = 1 << 20;
  next.tenants[0].admin = true;
  next.tenants[0].max_queued = 2;
  next.tenants[1] = tenant_cfg("carol", "batch", 'd');  // bob removed, carol added
  std::vector<std::string> created;
  auto res = reg.reload(next, [&](Tenant& t) {
    // Not visible yet: its token does not work while on_new runs.
    EXPECT_EQ(reg.by_token_hash(tok('d')), nullptr);
    created.push_back(t.name);
  });
  EXPECT_EQ(created, std::vector<std::string>{"carol"});
  EXPECT_EQ(res.added, std::vector<std::string>{"carol"});
  EXPECT_EQ(res.removed, std::vector<std::string>{"bob"});
  EXPECT_TRUE(res.restored.empty());

  EXPECT_EQ(reg.by_token_hash(tok('a')), nullptr);  // old token dead
  EXPECT_EQ(reg.by_token_hash(tok('c')), alice);    // same tenant object
  EXPECT_EQ(reg.by_token_hash(tok('b')), nullptr);  // removed tenant
  EXPECT_EQ(reg.by_name("bob"), nullptr);
  ASSERT_NE(reg.by_token_hash(tok('d')), nullptr);
  EXPECT_EQ(reg.by_token_hash(tok('d'))->name, "carol");
  // Usage and stored tensors survive; settings are the new ones.
  EXPECT_EQ(alice->account->used(), used);
  EXPECT_TRUE(alice->store.get("w").has_value());
  EXPECT_EQ(alice->account->limit(), 1 << 20);
  EXPECT_TRUE(alice->admin());
  EXPECT_EQ(alice->config().max_queued, 2);
  EXPECT_EQ(alice->config().partition, "interactive");
  ASSERT_EQ(reg.all().size(), 2u);
  EXPECT_EQ(reg.all_with_retired().size(), 3u);  // bob is retired, not destroyed
}

TEST(TenantRegistryReload, RemovedTenantComesBackWithItsTensors) {
  TenantRegistry reg(base_config());
  Tenant* bob = reg.by_name("bob");
  bob->store.put("kept", Tensor::empty_host(DType::kFloat32, {2}));
  ServerConfig without = base_config();
  without.tenants.pop_back();
  reg.reload(without);
  EXPECT_EQ(reg.by_name("bob"), nullptr);
  auto res = reg.reload(base_config());
  EXPECT_EQ(res.restored, std::vector<std::string>{"bob"});
  EXPECT_EQ(reg.by_token_hash(tok('b')), bob);
  EXPECT_TRUE(bob->store.get("kept").has_value());
}

TEST(TenantRegistryReload, EachAppliedReloadMovesTheGenerationARefusedOneDoesNot) {
  TenantRegistry reg(base_config());
  EXPECT_EQ(reg.generation(), 0u);
  reg.reload(base_config());
  EXPECT_EQ(reg.generation(), 1u) << "even an unchanged config: lookups cached before it are not trusted";
  ServerConfig bad = base_config();
  bad.tenants[1].partition = "interactive";  // a tenant may not change partition
  EXPECT_THROW(reg.reload(bad), Error);
  EXPECT_EQ(reg.generation(), 1u);
}

TEST(TenantRegistryReload, RefusalChangesNothing) {
  TenantRegistry reg(base_config());
  ServerConfig moved = base_config();
  moved.tenants[0].partition = "batch";
  moved.tenants[1].token_sha256 = tok('x');
  EXPECT_THROW(reg.reload(moved), Error);
  EXPECT_NE(reg.by_token_hash(tok('b')), nullptr);
  EXPECT_EQ(reg.by_token_hash(tok('x')), nullptr);
  // on_new throwing (a corrupt checkpoint): nothing applied either.
  ServerConfig next = base_config();
  next.tenants[1].token_sha256 = tok('x');
  next.tenants.push_back(tenant_cfg("carol", "batch", 'd'));
  EXPECT_THROW(reg.reload(next, [](Tenant&) { throw Error(ErrorCode::kBadRequest, "corrupt"); }), Error);
  EXPECT_NE(reg.by_token_hash(tok('b')), nullptr);
  EXPECT_EQ(reg.by_token_hash(tok('d')), nullptr);
  EXPECT_EQ(reg.all_with_retired().size(), 2u);
  ServerConfig anon = default_config(2);
  EXPECT_THROW(reg.reload(anon), Error);
}

// Lookups on many threads while reloads flip bob in and out: every lookup
// sees one whole snapshot (alice always there, tokens consistent). TSan
// checks the swap.
TEST(TenantRegistryReload, ConcurrentLookupsDuringReloads) {
  TenantRegistry reg(base_config());
  Tenant* alice = reg.by_name("alice");
  ServerConfig without_bob = base_config();
  without_bob.tenants.pop_back();
  std::atomic<bool> stop{false};
  std::atomic<int64_t> lookups{0};
  std::atomic<int> started{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&] {
      ++started;
      do {
        Tenant* a = reg.by_token_hash(tok('a'));
        EXPECT_EQ(a, alice);
        if (a) {
          EXPECT_EQ(a->config().partition, "interactive");
        }
        Tenant* b = reg.by_token_hash(tok('b'));
        if (b) {
          EXPECT_EQ(b->name, "bob");
          EXPECT_GE(b->config().max_queued, 8);
        }
        EXPECT_GE(reg.all().size(), 1u);
        ++lookups;
      } while (!stop.load());
    });
  }
  while (started.load() < 4) std::this_thread::yield();  // every reader overlaps the reloads
  for (int i = 0; i < 200; ++i) {
    ServerConfig c = i % 2 ? base_config() : without_bob;
    if (i % 2) c.tenants[1].max_queued = 8 + i;
    reg.reload(c);
  }
  stop.store(true);
  for (auto& t : readers) t.join();
  EXPECT_GE(lookups.load(), 4);
  EXPECT_EQ(reg.all_with_retired().size(), 2u);
}

// ---- FairQueue::reconfigure ----

QueuedJob job(uint64_t id, const std::string& tenant) {
  QueuedJob j;
  j.id = id;
  j.tenant = tenant;
  return j;
}

TEST(FairQueueReconfigure, LimitsApplyAtTheNextStart) {
  FairQueue fq({{"p", 1, 2}}, {{"a", "p", 1, 8, 8}});
  const auto now = Clock::time_point{} + std::chrono::hours(1);
  for (uint64_t i = 1; i <= 6; ++i) fq.push(job(i, "a"));
  ASSERT_TRUE(fq.pop("p", now));
  ASSERT_TRUE(fq.pop("p", now));
  EXPECT_FALSE(fq.pop("p", now));
  // Lower the limit to 1 with two running: both keep running, none starts.
  fq.reconfigure({{"p", 1, 1}}, {{"a", "p", 1, 8, 8}});
  EXPECT_EQ(fq.limit("p"), 1);
  EXPECT_EQ(fq.inflight("p"), 2);
  fq.finished(job(1, "a"), now, 0.01);
  EXPECT_FALSE(fq.pop("p", now));  // 1 running == new limit
  fq.finished(job(2, "a"), now, 0.01);
  ASSERT_TRUE(fq.pop("p", now));
  EXPECT_FALSE(fq.pop("p", now));
  // Raise it to 3; max_running 2 now binds.
  fq.reconfigure({{"p", 1, 3}}, {{"a", "p", 1, 8, 2}});
  ASSERT_TRUE(fq.pop("p", now));
  EXPECT_FALSE(fq.pop("p", now));
  EXPECT_EQ(fq.running("a"), 2);
  // max_queued lowered under the queue length: queued jobs stay, new ones 429.
  EXPECT_EQ(fq.queued("a"), 2);
  fq.reconfigure({}, {{"a", "p", 1, 1, 2}});
  EXPECT_EQ(fq.queued("a"), 2);
  EXPECT_THROW(fq.push(job(7, "a")), QueueFullError);
  EXPECT_EQ(fq.limit("p"), 3);  // a partition left out keeps its limit
}

TEST(FairQueueReconfigure, RemovedTenantRunsWhatItHasAndTakesNothingNew) {
  FairQueue fq({{"p", 1, 1}}, {{"a", "p", 1, 8, 4}, {"b", "p", 1, 8, 4}});
  const auto now = Clock::time_point{} + std::chrono::hours(1);
  fq.push(job(1, "b"));
  fq.push(job(2, "b"));
  fq.reconfigure({}, {{"a", "p", 1, 8, 4}, {"c", "p", 2, 8, 4}});
  ASSERT_EQ(fq.tenants().size(), 2u);
  EXPECT_EQ(fq.tenants()[1].name, "c");
  try {
    fq.push(job(3, "b"));
    FAIL() << "removed tenant accepted a job";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnauthenticated);
  }
  fq.push(job(4, "c"));
  // b's two queued jobs and c's job all run.
  std::set<uint64_t> ran;
  for (int i = 0; i < 3; ++i) {
    auto j = fq.pop("p", now);
    ASSERT_TRUE(j);
    ran.insert(j->id);
    fq.finished(*j, now, 0.01);
  }
  EXPECT_EQ(ran, (std::set<uint64_t>{1, 2, 4}));
  EXPECT_FALSE(fq.pop("p", now));
  // Listed again: it is back.
  fq.reconfigure({}, {{"a", "p", 1, 8, 4}, {"b", "p", 1, 8, 4}});
  fq.push(job(5, "b"));
  EXPECT_EQ(fq.completed("b"), 2);
}

TEST(FairQueueReconfigure, InvalidChangesNothing) {
  FairQueue fq({{"p", 1, 2}, {"q", 1, 2}}, {{"a", "p", 1, 8, 4}});
  EXPECT_THROW(fq.reconfigure({{"new", 1, 2}}, {{"a", "p", 1, 8, 4}}), Error);
  EXPECT_THROW(fq.reconfigure({{"p", 1, 0}}, {{"a", "p", 1, 8, 4}}), Error);
  EXPECT_THROW(fq.reconfigure({{"p", 1, 5}}, {{"a", "q", 1, 8, 4}}), Error);  // a moves
  EXPECT_THROW(fq.reconfigure({{"p", 1, 5}}, {{"a", "p", 0, 8, 4}}), Error);
  EXPECT_THROW(fq.reconfigure({{"p", 1, 5}}, {{"a", "p", 1, 8, 4}, {"a", "p", 1, 8, 4}}), Error);
  EXPECT_EQ(fq.limit("p"), 2);
  fq.push(job(1, "a"));  // a still active
  EXPECT_EQ(fq.queued("a"), 1);
}

// ---- JobScheduler::reconfigure with real runner threads ----

using testing_util::Counter;
using testing_util::Gate;

JobScheduler::FailFn no_fail() {
  return [](const Error& e) { ADD_FAILURE() << "unexpected fail: " << e.message(); };
}

TEST(JobSchedulerReconfigure, JobsRunAcrossReloadAndRaisedLimitAddsRunners) {
  auto clock = std::make_shared<ManualClock>();
  Gate gate;
  Counter done;
  std::atomic<int> running{0}, most{0};
  JobScheduler s({{"p", 1, 1}}, {{"a", "p", 1, 64, 8}, {"b", "p", 1, 64, 8}}, clock, 2);
  auto body = [&](const PartitionContext&) {
    const int r = ++running;
    int m = most.load();
    while (r > m && !most.compare_exchange_weak(m, r)) {
    }
    gate.wait();
    --running;
    done.add();
  };
  for (int i = 0; i < 6; ++i) s.submit(i % 2 ? "a" : "b", 0, kNoDeadline, body, no_fail());
  gate.wait_for_waiters(1);
  EXPECT_EQ(s.stats().partitions[0].inflight, 1);
  // Reload: limit 1 -> 3, b removed, c added. b's queued jobs still run.
  s.reconfigure({{"p", 1, 3}}, {{"a", "p", 1, 64, 8}, {"c", "p", 1, 64, 8}});
  gate.wait_for_waiters(3);  // new runners started the queued jobs
  auto st = s.stats();
  EXPECT_EQ(st.partitions[0].limit, 3);
  EXPECT_EQ(st.partitions[0].inflight, 3);
  ASSERT_EQ(st.tenants.size(), 2u);
  EXPECT_EQ(st.tenants[1].name, "c");
  try {
    s.submit("b", 0, kNoDeadline, body, no_fail());
    FAIL() << "removed tenant accepted a job";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnauthenticated);
  }
  s.submit("c", 0, kNoDeadline, body, no_fail());
  gate.open();
  done.wait_for(7);
  EXPECT_EQ(most.load(), 3);
  // Invalid reconfigure: refused, limit unchanged.
  EXPECT_THROW(s.reconfigure({{"zzz", 1, 9}}, {{"a", "p", 1, 64, 8}}), Error);
  EXPECT_EQ(s.stats().partitions[0].limit, 3);
  s.shutdown();
  s.reconfigure({{"p", 1, 9}}, {{"a", "p", 1, 64, 8}});  // after shutdown: no-op
  EXPECT_EQ(s.stats().partitions[0].limit, 3);
}

// Submits from several threads while reloads change limits: the partition
// never runs more than the limit in force when a job started... and never
// more than the largest limit ever set; every accepted job completes.
TEST(JobSchedulerReconfigure, ConcurrentSubmitsAndReloads) {
  auto clock = std::make_shared<ManualClock>();
  std::atomic<int> running{0}, most{0}, accepted{0};
  Counter done;
  std::vector<std::thread> submitters;
  JobScheduler s({{"p", 1, 2}}, {{"a", "p", 1, 1000, 8}, {"b", "p", 2, 1000, 8}}, clock, 2);
  for (int k = 0; k < 3; ++k) {
    submitters.emplace_back([&, k] {
      for (int i = 0; i < 100; ++i) {
        try {
          s.submit((i + k) % 2 ? "a" : "b", 0, kNoDeadline,
                   [&](const PartitionContext&) {
                     const int r = ++running;
                     int m = most.load();
                     while (r > m && !most.compare_exchange_weak(m, r)) {
                     }
                     --running;
                     done.add();
                   },
                   no_fail());
          ++accepted;
        } catch (const Error& e) {
          // b is removed during some reloads.
          EXPECT_EQ(e.code(), ErrorCode::kUnauthenticated);
        }
      }
    });
  }
  for (int i = 0; i < 50; ++i) {
    std::vector<TenantSpec> tenants = {{"a", "p", 1, 1000, 8}};
    if (i % 3) tenants.push_back({"b", "p", 2, 1000, 8});
    s.reconfigure({{"p", 1, 1 + i % 3}}, tenants);
  }
  for (auto& t : submitters) t.join();
  done.wait_for(accepted.load());
  EXPECT_LE(most.load(), 3);
  s.shutdown();
}

}  // namespace
}  // namespace tensord
