#include "scheduler/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "graphs/graph_pool.h"
#include "graphs/replay_plan.h"
#include "metrics/metrics.h"
#include "ops/error.h"
#include "ops/fake/fake_backend.h"
#include "tests/unit/graphs/fake_device_kernels.h"
#include "tests/unit/graphs/program_builder.h"
#include "tests/unit/scheduler/run_job.h"

namespace tensord {
namespace {
using namespace testing_util;

ServerConfig config_with(int limit, int64_t memory = INT64_MAX) {
  ServerConfig c = default_config(limit);
  c.tenants[0].name = "t";
  c.tenants[0].memory_bytes = memory;
  return c;
}

std::unique_ptr<Engine> make_engine(int limit = 2) {
  return std::make_unique<Engine>(make_backend("cpu", 1), config_with(limit));
}

JobSpec add_job(Tensor x) {
  JobSpec s;
  s.program.nodes.push_back(node("a", "add", {ref("x"), ref("x")}, {"y"}));
  s.program.nodes.push_back(node("b", "neg", {ref("y")}, {"z"}));
  s.program.outputs = {"y", "z"};
  s.inputs["x"] = std::move(x);
  return s;
}

TEST(Engine, RunsAndReturnsUnstoredOutputs) {
  auto e = make_engine();
  Tenant t(config_with(2).tenants[0]);
  JobSpec s = add_job(f32({2}, {1, 2}));
  s.store["y"] = "res/y";
  {
    JobResult r = testing_util::run_job(*e, t, std::move(s));
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_EQ(r.outputs[0].first, "z");
    EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[1], -4.f);
    EXPECT_EQ(t.account->used(), 16) << "the stored y and the returned z (job temporaries count)";
    EXPECT_EQ(r.backend, "cpu");
    EXPECT_EQ(r.partition, "default");
    ASSERT_TRUE(r.libraries);
    EXPECT_FALSE(r.libraries->empty());
  }
  ASSERT_TRUE(t.store.get("res/y"));
  EXPECT_FLOAT_EQ(t.store.get("res/y")->data_ptr<float>()[1], 4.f);
  EXPECT_EQ(t.account->used(), 8);
}

TEST(Engine, FailedProgramCommitsNothing) {
  auto e = make_engine();
  Tenant t(config_with(2).tenants[0]);
  t.store.put("w", f32({2}, {5, 6}));
  JobSpec s;
  s.program.nodes.push_back(node("c", "copy_", {ref("$stored/w"), ref("x")}, {}));
  s.program.nodes.push_back(node("ok", "neg", {ref("x")}, {"y"}));
  s.program.nodes.push_back(node("boom", "linalg.eigh", {ref("m")}, {"ev", "vec"}));
  s.program.outputs = {"y", "ev"};
  s.inputs["x"] = f32({2}, {1, 2});
  s.inputs["m"] = f32({2, 2}, {1, NAN, NAN, 1});
  s.store["y"] = "out/y";
  try {
    testing_util::run_job(*e, t, std::move(s));
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kNumericalError);
    EXPECT_EQ(err.node(), "boom");
  }
  EXPECT_FALSE(t.store.get("out/y"));
  EXPECT_FLOAT_EQ(t.store.get("w")->data_ptr<float>()[0], 5.f);
  EXPECT_EQ(t.account->used(), 8);
}

TEST(Engine, InPlaceCommitsOnSuccess) {
  auto e = make_engine();
  Tenant t(config_with(2).tenants[0]);
  t.store.put("w", f32({2}, {5, 6}));
  JobSpec s;
  s.program.nodes.push_back(node("c", "copy_", {ref("$stored/w"), ref("x")}, {}));
  s.inputs["x"] = f32({2}, {1, 2});
  testing_util::run_job(*e, t, std::move(s));
  EXPECT_FLOAT_EQ(t.store.get("w")->data_ptr<float>()[1], 2.f);
  EXPECT_EQ(t.account->used(), 8);
}

TEST(Engine, BadStoreAndReturnNames) {
  auto e = make_engine();
  Tenant t(config_with(2).tenants[0]);
  JobSpec s = add_job(f32({2}, {1, 2}));
  s.store["nope"] = "x";
  EXPECT_THROW(testing_util::run_job(*e, t, std::move(s)), Error);
  JobSpec s2 = add_job(f32({2}, {1, 2}));
  s2.store["y"] = "../evil";
  EXPECT_THROW(testing_util::run_job(*e, t, std::move(s2)), Error);
  JobSpec s3 = add_job(f32({2}, {1, 2}));
  s3.return_names = std::vector<std::string>{"nope"};
  EXPECT_THROW(testing_util::run_job(*e, t, std::move(s3)), Error);
  EXPECT_TRUE(t.store.list("").empty());
}

TEST(Engine, QuotaOnStoreFailsWholeJob) {
  auto e = make_engine();
  Tenant t(config_with(2, 10).tenants[0]);
  JobSpec s = add_job(f32({4}, {1, 2, 3, 4}));
  s.store["y"] = "y";
  s.store["z"] = "z";
  try {
    testing_util::run_job(*e, t, std::move(s));
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kQuotaExceeded);
  }
  EXPECT_TRUE(t.store.list("").empty());
  EXPECT_EQ(t.account->used(), 0);
}

TEST(Engine, ManyConcurrentJobs) {
  auto e = make_engine(2);
  Tenant t(config_with(2).tenants[0]);
  std::vector<std::thread> th;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    th.emplace_back([&, i] {
      for (int k = 0; k < 20; ++k) {
        JobResult r = testing_util::run_job(*e, t, add_job(f32({3}, {1.f * i, 2, 3})));
        if (r.outputs.size() == 2 && r.outputs[1].second.data_ptr<float>()[0] == -2.f * i) ++ok;
      }
    });
  }
  for (auto& x : th) x.join();
  EXPECT_EQ(ok.load(), 160);
}

TEST(Engine, ShutdownRefusesNewJobs) {
  auto e = make_engine();
  Tenant t(config_with(2).tenants[0]);
  e->shutdown();
  try {
    testing_util::run_job(*e, t, add_job(f32({1}, {1})));
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kUnavailable);
  }
}

}  // namespace
}  // namespace tensord

namespace tensord {
namespace {
using namespace testing_util;

// A job of `n` chained 200x200 matmuls: long enough to hold a limit-1 partition.
JobSpec long_job(int n) {
  JobSpec s;
  s.program.nodes.push_back(node("r", "rand", {lit(Attr(std::vector<int64_t>{200, 200}))}, {"x0"},
                                 {{"dtype", ref("float64")}, {"seed", lit(Attr(int64_t{1}))}}));
  for (int i = 0; i < n; ++i) {
    s.program.nodes.push_back(node("m" + std::to_string(i), "matmul", {ref("x" + std::to_string(i)), ref("x0")},
                                   {"x" + std::to_string(i + 1)}));
  }
  s.program.outputs = {"x" + std::to_string(n)};
  return s;
}

TEST(EngineAsync, CancelQueuedAndRunningJobs) {
  auto e = make_engine(1);
  Tenant t(config_with(1).tenants[0]);
  auto running = e->submit(t, long_job(2000));
  auto queued = e->submit(t, add_job(f32({2}, {1, 2})));
  queued->cancel("test");
  EXPECT_EQ(queued->state(), JobState::kCancelled) << "a queued job ends at once";
  EXPECT_EQ(queued->error()->code(), ErrorCode::kCancelled);
  for (int i = 0; i < 500 && running->state() == JobState::kQueued; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  running->cancel("test");
  EXPECT_EQ(running->wait(), JobState::kCancelled);
  // The partition is free again.
  JobResult r = testing_util::run_job(*e, t, add_job(f32({1}, {3})));
  EXPECT_EQ(r.outputs.size(), 2u);
  e->shutdown();  // waits for running jobs before the tenant goes away
}

TEST(EngineAsync, DeadlineWhileQueued) {
  auto e = make_engine(1);
  Tenant t(config_with(1).tenants[0]);
  auto running = e->submit(t, long_job(400));
  JobSpec s = add_job(f32({1}, {1}));
  s.deadline_ms = 1;
  try {
    testing_util::run_job(*e, t, std::move(s));
    FAIL() << "expected deadline_exceeded";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kDeadlineExceeded);
  }
  running->cancel("done");
  running->wait();
  e->shutdown();
}

TEST(EngineAsync, QueueFullCarriesRetryAfter) {
  ServerConfig c = config_with(1);
  c.tenants[0].max_queued = 1;
  Engine e(make_backend("cpu", 1), c);
  Tenant t(c.tenants[0]);
  auto a = e.submit(t, long_job(400));
  for (int i = 0; i < 500 && a->state() == JobState::kQueued; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  auto b = e.submit(t, add_job(f32({1}, {1})));  // waits: the queue holds one
  try {
    e.submit(t, add_job(f32({1}, {1})));
    FAIL() << "expected queue_full";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kQueueFull);
    EXPECT_GE(err.retry_after_s(), 1);
    EXPECT_LE(err.retry_after_s(), 60);
  }
  a->cancel("done");
  b->cancel("done");
  e.shutdown();  // waits for the running job before the tenant goes away
}

TEST(EngineAsync, RunAsyncCallsDoneOnceWhenTheJobEnds) {
  auto e = make_engine(1);
  Tenant t(config_with(1).tenants[0]);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<JobState, std::string>> ends;  // per done call: state, and the result's first output
  auto done = [&](Job& j) {
    std::string first;
    if (j.state() == JobState::kSucceeded) first = Engine::result_of(j).outputs.at(0).first;
    std::lock_guard lk(mu);
    ends.emplace_back(j.state(), first);
    cv.notify_all();
  };
  auto blocker = e->submit(t, long_job(2000));
  auto ok = e->run_async(t, add_job(f32({2}, {1, 2})), done);
  auto cancelled = e->run_async(t, add_job(f32({2}, {1, 2})), done);
  cancelled->cancel("test");  // still queued behind the blocker: done runs on this thread
  {
    std::lock_guard lk(mu);
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_EQ(ends[0].first, JobState::kCancelled);
  }
  blocker->cancel("test");
  {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(10), [&] { return ends.size() == 2; }));
    EXPECT_EQ(ends[1].first, JobState::kSucceeded);
    EXPECT_EQ(ends[1].second, "y");
  }
  // A refused job throws and never calls done.
  JobSpec bad = add_job(f32({2}, {1, 2}));
  bad.program.nodes[0].op = "no_such_op";
  EXPECT_THROW(e->run_async(t, std::move(bad), done), Error);
  e->shutdown();
  std::lock_guard lk(mu);
  EXPECT_EQ(ends.size(), 2u);
}

// A captured graph's plan over `pool`, on the engine's backend.
std::shared_ptr<ReplayPlan> plan_for(Engine& e, const Program& p, const std::map<std::string, TensorMeta>& in,
                                     GraphPool& pool, const std::shared_ptr<MemoryAccount>& acct) {
  auto cp = std::make_shared<const CompiledProgram>(compile_program(p, in, nullptr));
  std::map<std::string, Tensor> bufs;
  for (const auto& [name, m] : in) bufs.emplace(name, Tensor::empty(&e.backend(), Device{}, m.dtype, m.shape, acct));
  return std::make_shared<ReplayPlan>(cp, bufs, pool, &e.backend(), Device{});
}

TEST(EngineAsync, ReplaysSharingAPoolWaitAtItsGateNotOnARunner) {
  auto e = make_engine(2);
  Tenant t(config_with(2).tenants[0]);
  auto pool = std::make_shared<GraphPool>(&e->backend(), Device{}, t.account);
  auto slow = plan_for(*e, long_job(1500).program, {}, *pool, t.account);
  Program neg;
  neg.nodes.push_back(node("n", "neg", {ref("x")}, {"y"}));
  neg.outputs = {"y"};
  auto quick = plan_for(*e, neg, {{"x", meta(DType::kFloat32, {2})}}, *pool, t.account);

  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> order;
  auto done = [&](const std::string& tag) {
    return [&, tag](Job& j) {
      std::lock_guard lk(mu);
      order.push_back(tag + ":" + std::string(job_state_name(j.state())));
      cv.notify_all();
    };
  };
  auto a = e->replay_async(t, slow, pool, JobSpec{}, done("a"));
  for (int i = 0; i < 1000 && a->state() == JobState::kQueued; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(a->state(), JobState::kRunning);
  JobSpec qs;
  qs.inputs["x"] = f32({2}, {1, 2});
  auto b = e->replay_async(t, quick, pool, std::move(qs), done("b"));
  JobSpec cs;
  cs.inputs["x"] = f32({2}, {3, 4});
  auto c = e->replay_async(t, quick, pool, std::move(cs), done("c"));
  EXPECT_EQ(pool->gate().waiting(), 2u);
  EXPECT_EQ(b->state(), JobState::kQueued);
  c->cancel("test");  // waiting at the gate: ends at once
  // The partition's second runner is free: a plain job runs while `a` does.
  JobResult r = testing_util::run_job(*e, t, add_job(f32({1}, {5})));
  EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[0], 10.f);
  EXPECT_EQ(a->state(), JobState::kRunning) << "the plain job did not wait for the slow replay";
  a->cancel("test");
  {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(20), [&] { return order.size() == 3; }));
    EXPECT_EQ(order, (std::vector<std::string>{"c:cancelled", "a:cancelled", "b:succeeded"}));
  }
  EXPECT_FLOAT_EQ(Engine::result_of(*b).outputs.at(0).second.data_ptr<float>()[1], -2.f);
  // b's end (just after its answer) admits the cancelled c, which only frees
  // the gate again.
  for (int i = 0; i < 500 && pool->gate().waiting() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(pool->gate().waiting(), 0u);
  // The gate is open again: a replay runs.
  JobSpec ds;
  ds.inputs["x"] = f32({2}, {7, 8});
  auto d = e->replay_async(t, quick, pool, std::move(ds), done("d"));
  EXPECT_EQ(d->wait(), JobState::kSucceeded);
  e->shutdown();
}

TEST(JobOnEnd, RunsOnceWhetherRegisteredBeforeOrAfterTheEnd) {
  Job a("job-1", "t", "p");
  int calls = 0;
  a.on_end([&] { ++calls; });
  EXPECT_EQ(calls, 0);
  ASSERT_TRUE(a.start());
  a.succeed(JobResult{});
  EXPECT_EQ(calls, 1);
  a.fail(Error(ErrorCode::kInternal, "late"));  // no-op: already ended
  EXPECT_EQ(calls, 1);
  a.on_end([&] { calls += 10; });  // registered after the end: runs at once
  EXPECT_EQ(calls, 11);
}

TEST(JobOnFinal, RunsOnceBeforeTheEndIsAnswered) {
  Job a("job-1", "t", "p");
  std::vector<std::string> order;
  a.set_on_final([&](const Job& j) { order.push_back("final:" + std::string(job_state_name(j.state()))); });
  a.on_end([&] { order.push_back("end"); });
  a.fail(Error(ErrorCode::kCancelled, "while queued"));
  a.fail(Error(ErrorCode::kInternal, "late"));
  EXPECT_EQ(order, (std::vector<std::string>{"final:cancelled", "end"}));
}

// The engine records a job's metrics before its end is answered: a client
// that scrapes right after its reply counts its job.
double jobs_succeeded(const std::string& text) {
  const std::string key = "tensord_jobs_total{partition=\"default\",state=\"succeeded\",tenant=\"t\"} ";
  const size_t at = text.find(key);
  return at == std::string::npos ? 0 : std::stod(text.substr(at + key.size()));
}

TEST(EngineMetricsOrder, AJobIsCountedBeforeItsCallerIsAnswered) {
  auto e = std::make_unique<Engine>(make_backend("cpu", 1), config_with(2));
  Tenant t(config_with(2).tenants[0]);
  for (int i = 0; i < 20; ++i) {
    const double before = jobs_succeeded(render_metrics());
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    double seen = -1;
    e->run_async(t, add_job(f32({2}, {1, 2})), [&](Job&) {
      const double n = jobs_succeeded(render_metrics());
      std::lock_guard<std::mutex> lk(mu);
      seen = n;
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return done; });
    EXPECT_EQ(seen, before + 1) << "run " << i;
  }
}

}  // namespace
}  // namespace tensord

namespace tensord {
namespace {

TEST(EngineStreams, OneStreamPerRunnerOfEachPartition) {
  auto fake = std::make_unique<FakeBackend>();
  FakeBackend* f = fake.get();
  ServerConfig c = config_with(3);
  PartitionSpec second = c.partitions[0];
  second.name = "second";
  second.share = 0.25;
  second.workqueue_limit = 2;
  c.partitions[0].share = 0.5;
  c.partitions.push_back(second);
  Engine e(std::move(fake), c);
  EXPECT_EQ(f->live_streams(), 5);  // 3 + 2: a stream per runner, made once at start
}

}  // namespace
}  // namespace tensord

namespace tensord {
namespace {
using namespace testing_util;

// A job beside a device backend: what it stores stays on the device, what it
// returns comes back in host memory, and the next job finds its stored
// tensors where the device kernels want them (graphs/device_placement.h).
TEST(EngineDevice, StoredResultsStayOnTheDeviceAndReturnedOnesComeBackToTheHost) {
  auto fake = std::make_unique<FakeBackend>();
  FakeBackend* f = fake.get();
  Engine e(std::move(fake), config_with(2));
  Tenant t(config_with(2).tenants[0]);
  JobSpec s = add_job(f32({2}, {1, 2}));  // add (device), neg (host fallback)
  s.store["y"] = "res/y";
  {
    JobResult r = testing_util::run_job(e, t, std::move(s));
    ASSERT_EQ(r.outputs.size(), 1u);
    ASSERT_TRUE(r.outputs[0].second.on_host());
    EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[1], -4.f);
    EXPECT_EQ(r.backend, "fake");
  }
  std::optional<Tensor> y = t.store.get("res/y");
  ASSERT_TRUE(y);
  EXPECT_EQ(y->device().type, DeviceType::kFake);
  EXPECT_EQ(y->to_host().data_ptr<float>()[1], 4.f);
  EXPECT_EQ(t.account->used(), 8) << "only the stored y is left";

  const int64_t uploads = f->copies_to_device();
  JobSpec s2;
  s2.program.nodes.push_back(node("m", "mul", {ref("$stored/res/y"), ref("$stored/res/y")}, {"z"}));
  s2.program.outputs = {"z"};
  JobResult r2 = testing_util::run_job(e, t, std::move(s2));
  EXPECT_EQ(f->copies_to_device(), uploads) << "the stored y is already on the device";
  ASSERT_TRUE(r2.outputs[0].second.on_host());
  EXPECT_FLOAT_EQ(r2.outputs[0].second.data_ptr<float>()[1], 16.f);
}

// A stored tensor PUT in host memory and read by a device kernel is copied
// once: the job's copy replaces it in the store (same values, same version),
// the host bytes are released, and later jobs read it where it is.
TEST(EngineDevice, AStoredHostTensorReadOnTheDeviceMovesThereOnce) {
  auto fake = std::make_unique<FakeBackend>();
  FakeBackend* f = fake.get();
  Engine e(std::move(fake), config_with(2));
  Tenant t(config_with(2).tenants[0]);
  t.store.put("x", f32({3}, {1, 2, 3}));
  const uint64_t version = t.store.version();
  auto square = [] {
    JobSpec s;
    s.program.nodes.push_back(node("m", "mul", {ref("$stored/x"), ref("$stored/x")}, {"z"}));
    s.program.outputs = {"z"};
    return s;
  };
  const int64_t before = f->copies_to_device();
  JobResult r = testing_util::run_job(e, t, square());
  EXPECT_EQ(f->copies_to_device(), before + 1);
  EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[2], 9.f);
  std::optional<Tensor> x = t.store.get("x");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->device().type, DeviceType::kFake);
  EXPECT_EQ(t.store.version(), version) << "a relocation is not a change of value";
  EXPECT_EQ(t.account->used(), 12) << "the host copy is released";
  x.reset();
  JobResult r2 = testing_util::run_job(e, t, square());
  EXPECT_EQ(f->copies_to_device(), before + 1) << "the second job reads x on the device";
  EXPECT_FLOAT_EQ(r2.outputs[0].second.data_ptr<float>()[1], 4.f);
}

// A job binds its stream to its runner thread while it runs (a device
// backend orders memory and copies on it), once, and unbinds it before its
// caller wakes, failed or not; the copies in and out happen while bound.
TEST(EngineDevice, AJobBindsItsStreamWhileItRuns) {
  auto fake = std::make_unique<FakeBackend>();
  FakeBackend* f = fake.get();
  Engine e(std::move(fake), config_with(2));
  Tenant t(config_with(2).tenants[0]);
  JobResult r = testing_util::run_job(e, t, add_job(f32({2}, {1, 2})));
  EXPECT_EQ(f->binds(), 1);
  EXPECT_EQ(f->unbinds(), 1);
  EXPECT_EQ(f->bound_copies(), f->copies_to_device() + f->copies_to_host())
      << "the upload and the download of the result are on the job's stream";
  EXPECT_EQ(FakeBackend::t_bound_stream(), 0) << "never bound on the caller's thread";
  JobSpec bad;
  bad.program.nodes.push_back(node("e", "linalg.eigvalsh", {ref("x")}, {"w"}));  // NaN: fails as it runs
  bad.program.outputs = {"w"};
  bad.inputs["x"] = f32({1, 1}, {std::numeric_limits<float>::quiet_NaN()});
  EXPECT_THROW(testing_util::run_job(e, t, std::move(bad)), Error);
  EXPECT_EQ(f->binds(), f->unbinds()) << "a failed job unbinds too";
}

TEST(TensorStoreRelocate, OnlyReplacesTheTensorItWasCopiedFrom) {
  auto acct = std::make_shared<MemoryAccount>("t", 1 << 20);
  TensorStore store(acct);
  store.put("x", f32({2}, {1, 2}));
  Tensor was = *store.get("x");
  store.put("x", f32({2}, {5, 6}));  // replaced while a job ran
  EXPECT_FALSE(store.relocate("x", was, f32({2}, {1, 2})));
  EXPECT_FLOAT_EQ(store.get("x")->data_ptr<float>()[0], 5.f);
  EXPECT_FALSE(store.relocate("gone", was, f32({2}, {1, 2})));
  Tensor now = *store.get("x");
  EXPECT_FALSE(store.relocate("x", now, f32({3}, {5, 6, 0}))) << "another shape is not the same values";
  EXPECT_TRUE(store.relocate("x", now, f32({2}, {5, 6})));
  EXPECT_NE(store.get("x")->storage(), now.storage());
}

}  // namespace
}  // namespace tensord

namespace tensord {
namespace {
using namespace testing_util;

// A shutdown's drain: begin_drain refuses new jobs and fails queued ones
// with 503 without waiting for the running one; cancel_running ends that one
// at its next node boundary with the drain's error (503), not 499.
TEST(EngineDrain, BeginDrainDoesNotWaitAndCancelRunningEndsWithTheReason) {
  auto e = make_engine(1);
  Tenant t(config_with(1).tenants[0]);
  auto running = e->submit(t, long_job(20000));
  for (int i = 0; i < 2000 && running->state() == JobState::kQueued; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(running->state(), JobState::kRunning);
  auto queued = e->submit(t, add_job(f32({2}, {1, 2})));
  EXPECT_EQ(e->running_jobs(), 1u);

  const auto t0 = std::chrono::steady_clock::now();
  e->begin_drain();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500)) << "begin_drain must not block";
  EXPECT_EQ(queued->state(), JobState::kFailed);
  EXPECT_EQ(queued->error()->code(), ErrorCode::kUnavailable);
  EXPECT_EQ(running->state(), JobState::kRunning) << "running jobs get the drain timeout";
  EXPECT_THROW(e->submit(t, add_job(f32({1}, {1}))), Error);

  EXPECT_EQ(e->cancel_running(Error(ErrorCode::kUnavailable, "server is shutting down")), 1u);
  EXPECT_EQ(running->wait(), JobState::kFailed);
  EXPECT_EQ(running->error()->code(), ErrorCode::kUnavailable);
  EXPECT_EQ(e->running_jobs(), 0u);
  e->shutdown();
}

TEST(EngineDrain, PlainCancelStaysCancelled) {
  auto e = make_engine(1);
  Tenant t(config_with(1).tenants[0]);
  auto running = e->submit(t, long_job(20000));
  for (int i = 0; i < 2000 && running->state() == JobState::kQueued; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  running->cancel("client went away");
  EXPECT_EQ(running->wait(), JobState::kCancelled);
  EXPECT_EQ(running->error()->code(), ErrorCode::kCancelled);
  e->shutdown();
}

// Job::on_end registered while the job is ending (on_final still running)
// must not overtake on_final: the answer would go out before the job is
// counted. (EngineMetricsOrder caught it once a log line widened the window.)
TEST(JobOnFinal, AnOnEndRegisteredWhileOnFinalRunsWaitsForIt) {
  for (int i = 0; i < 50; ++i) {
    Job j("job-x", "t", "p");
    std::atomic<bool> final_done{false}, in_final{false};
    j.set_on_final([&](const Job&) {
      in_final = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      final_done = true;
    });
    std::thread ender([&] { j.succeed(JobResult{}); });
    while (!in_final) std::this_thread::yield();
    std::atomic<bool> saw_final{false};
    j.on_end([&] { saw_final = final_done.load(); });
    EXPECT_EQ(j.wait(), JobState::kSucceeded);
    EXPECT_TRUE(final_done.load()) << "wait() returns after on_final";
    ender.join();
    EXPECT_TRUE(saw_final.load()) << "run " << i;
  }
}

}  // namespace
}  // namespace tensord
