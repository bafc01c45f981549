#include "scheduler/engine.h"

#include <gtest/gtest.h>

#include <thread>

#include "ops/error.h"
#include "tests/unit/graphs/program_builder.h"

namespace tensord {
namespace {
using namespace testing_util;

std::unique_ptr<Engine> make_engine(int limit = 2) {
  EngineOptions o;
  o.workqueue_limit = limit;
  return std::make_unique<Engine>(make_backend("cpu", 2), o);
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
  Tenant t("t");
  JobSpec s = add_job(f32({2}, {1, 2}));
  s.store["y"] = "res/y";
  {
    JobResult r = e->run(t, std::move(s));
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_EQ(r.outputs[0].first, "z");
    EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[1], -4.f);
    EXPECT_EQ(t.account->used(), 16) << "the stored y and the returned z (job temporaries count)";
    EXPECT_EQ(r.backend, "cpu");
    EXPECT_EQ(r.partition, "default");
    EXPECT_FALSE(r.libraries.empty());
  }
  ASSERT_TRUE(t.store.get("res/y"));
  EXPECT_FLOAT_EQ(t.store.get("res/y")->data_ptr<float>()[1], 4.f);
  EXPECT_EQ(t.account->used(), 8);
}

TEST(Engine, FailedProgramCommitsNothing) {
  auto e = make_engine();
  Tenant t("t");
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
    e->run(t, std::move(s));
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
  Tenant t("t");
  t.store.put("w", f32({2}, {5, 6}));
  JobSpec s;
  s.program.nodes.push_back(node("c", "copy_", {ref("$stored/w"), ref("x")}, {}));
  s.inputs["x"] = f32({2}, {1, 2});
  e->run(t, std::move(s));
  EXPECT_FLOAT_EQ(t.store.get("w")->data_ptr<float>()[1], 2.f);
  EXPECT_EQ(t.account->used(), 8);
}

TEST(Engine, BadStoreAndReturnNames) {
  auto e = make_engine();
  Tenant t("t");
  JobSpec s = add_job(f32({2}, {1, 2}));
  s.store["nope"] = "x";
  EXPECT_THROW(e->run(t, std::move(s)), Error);
  JobSpec s2 = add_job(f32({2}, {1, 2}));
  s2.store["y"] = "../evil";
  EXPECT_THROW(e->run(t, std::move(s2)), Error);
  JobSpec s3 = add_job(f32({2}, {1, 2}));
  s3.return_names = std::vector<std::string>{"nope"};
  EXPECT_THROW(e->run(t, std::move(s3)), Error);
  EXPECT_TRUE(t.store.list("").empty());
}

TEST(Engine, QuotaOnStoreFailsWholeJob) {
  auto e = make_engine();
  Tenant t("t", 10);
  JobSpec s = add_job(f32({4}, {1, 2, 3, 4}));
  s.store["y"] = "y";
  s.store["z"] = "z";
  try {
    e->run(t, std::move(s));
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kQuotaExceeded);
  }
  EXPECT_TRUE(t.store.list("").empty());
  EXPECT_EQ(t.account->used(), 0);
}

TEST(Engine, ManyConcurrentJobs) {
  auto e = make_engine(2);
  Tenant t("t");
  std::vector<std::thread> th;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    th.emplace_back([&, i] {
      for (int k = 0; k < 20; ++k) {
        JobResult r = e->run(t, add_job(f32({3}, {1.f * i, 2, 3})));
        if (r.outputs.size() == 2 && r.outputs[1].second.data_ptr<float>()[0] == -2.f * i) ++ok;
      }
    });
  }
  for (auto& x : th) x.join();
  EXPECT_EQ(ok.load(), 160);
}

TEST(Engine, ShutdownRefusesNewJobs) {
  auto e = make_engine();
  Tenant t("t");
  e->shutdown();
  try {
    e->run(t, add_job(f32({1}, {1})));
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kUnavailable);
  }
}

}  // namespace
}  // namespace tensord
