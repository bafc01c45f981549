// When a job's inputs are released: those charged to the tenant before its
// caller is woken (the tenant's memory shows only what it keeps), those
// charged to no one (views of a request body) once it has ended, off the
// job's run time; either way, none outlives the job.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "ops/error.h"
#include "scheduler/engine.h"
#include "tests/unit/scheduler/run_job.h"
#include "tests/unit/graphs/program_builder.h"
#include "tests/unit/scheduler/one_tenant_config.h"

namespace tensord {
namespace {
using namespace testing_util;

// An SGD step (momentum 0.9, state under "s") on stored w with its gradient
// `g` as a request input.
JobSpec step_with(Tensor g) {
  JobSpec s;
  s.program.nodes.push_back(node("step", "optim.sgd", {refs({"$stored/w"}), refs({"g"})}, {},
                                 {{"momentum", lit(Attr(0.9))}, {"state", lit(Attr("s"))}}));
  s.inputs["g"] = std::move(g);
  return s;
}

// A float32 view into a "request body" that only the view keeps alive.
Tensor body_view(std::weak_ptr<const void>* body_alive, int64_t n, float v) {
  auto body = std::make_shared<std::string>(static_cast<size_t>(n) * 4 + 64, '\0');
  auto* p = reinterpret_cast<float*>(body->data() + 64);
  for (int64_t i = 0; i < n; ++i) p[i] = v;
  std::shared_ptr<const void> owner = body;
  *body_alive = owner;
  TensorMeta m;
  m.dtype = DType::kFloat32;
  m.shape = {n};
  return Tensor(m, Storage::wrap(p, static_cast<size_t>(n) * 4, owner, body->size()));
}

bool released_within(const std::weak_ptr<const void>& w, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!w.expired() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return w.expired();
}

TEST(EngineInputs, ARequestBodyInputIsReleasedOnceTheJobEnds) {
  Engine e(make_backend("cpu", 1), one_tenant_config());
  Tenant t(one_tenant_config().tenants[0]);
  t.store.put("w", f32({4}, {1, 2, 3, 4}));
  std::weak_ptr<const void> body;
  testing_util::run_job(e, t, step_with(body_view(&body, 4, 10.f)));
  EXPECT_FLOAT_EQ(t.store.get("w")->data_ptr<float>()[0], 1.f - 1e-3f * 10.f);
  EXPECT_TRUE(released_within(body, std::chrono::seconds(10))) << "the body outlived its job";
  EXPECT_EQ(t.account->used(), 32) << "w and its momentum buffer";
}

TEST(EngineInputs, AFailedJobReleasesItsBodyInputToo) {
  Engine e(make_backend("cpu", 1), one_tenant_config());
  Tenant t(one_tenant_config().tenants[0]);
  t.store.put("w", f32({4}, {1, 2, 3, 4}));
  t.store.put("s/w/momentum_buffer", f32({3}, {0, 0, 0}));  // the kernel finds it has another shape
  std::weak_ptr<const void> body;
  EXPECT_THROW(testing_util::run_job(e, t, step_with(body_view(&body, 4, 1.f))), Error);
  EXPECT_TRUE(released_within(body, std::chrono::seconds(10)));
  EXPECT_FLOAT_EQ(t.store.get("w")->data_ptr<float>()[1], 2.f);
}

TEST(EngineInputs, AChargedInputIsReleasedBeforeTheCallerWakes) {
  Engine e(make_backend("cpu", 1), one_tenant_config());
  Tenant t(one_tenant_config().tenants[0]);
  t.store.put("w", f32({4}, {1, 2, 3, 4}));
  Tensor g = f32({4}, {1, 1, 1, 1});
  g.storage()->charge(t.account);
  ASSERT_EQ(t.account->used(), 32);
  testing_util::run_job(e, t, step_with(std::move(g)));
  // No waiting: run() returns once the job has woken it.
  EXPECT_EQ(t.account->used(), 32) << "w and its momentum buffer only: the charged input is released";
}

// What the tenant was charged for the request's body as it arrived
// (JobSpec::body_charge): held while the job holds its inputs, released
// before the caller wakes, whether the job succeeds or fails.
TEST(EngineInputs, TheBodysChargeIsReleasedBeforeTheCallerWakes) {
  Engine e(make_backend("cpu", 1), one_tenant_config());
  Tenant t(one_tenant_config().tenants[0]);
  t.store.put("w", f32({4}, {1, 2, 3, 4}));
  for (bool fail : {false, true}) {
    if (fail) t.store.put("s/w/momentum_buffer", f32({3}, {0, 0, 0}));  // another shape: the step fails
    const int64_t before = t.account->used();
    t.account->charge(1000);
    JobSpec spec = step_with(f32({4}, {1, 1, 1, 1}));
    spec.body_charge = std::shared_ptr<void>(nullptr, [a = t.account](void*) { a->release(1000); });
    // What the tenant holds when the job's caller is woken (its done callback).
    std::promise<int64_t> woke;
    std::future<int64_t> at = woke.get_future();
    std::shared_ptr<Job> job =
        e.run_async(t, std::move(spec), [&t, &woke](Job&) { woke.set_value(t.account->used()); });
    ASSERT_EQ(at.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    const int64_t at_wake = at.get();
    EXPECT_EQ(job->state(), fail ? JobState::kFailed : JobState::kSucceeded);
    // Succeeded: w and its new momentum buffer (16 bytes); failed: as before.
    EXPECT_EQ(at_wake, fail ? before : before + 16) << (fail ? "failed" : "succeeded");
  }
}

}  // namespace
}  // namespace tensord
