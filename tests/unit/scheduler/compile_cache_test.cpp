// A /v1/run program sent again is compiled once (scheduler/compile_cache.h):
// by program and input metas, per tenant, never when it reads a stored
// tensor, bounded per tenant.
#include "scheduler/compile_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "ops/mx_tensor.h"
#include "scheduler/engine.h"
#include "tests/unit/graphs/program_builder.h"
#include "tests/unit/scheduler/run_job.h"

namespace tensord {
namespace {
using namespace testing_util;

ServerConfig two_tenants() {
  ServerConfig c = default_config(2);
  c.tenants[0].name = "t";
  TenantSpec u = c.tenants[0];
  u.name = "u";
  u.token_sha256 = std::string(64, 'b');
  c.tenants.push_back(u);
  return c;
}

JobSpec scaled(const std::string& sha, Tensor x, const std::string& by = "") {
  JobSpec s;
  s.program_sha256 = sha;
  s.program.nodes.push_back(node("a", "mul", {ref("x"), by.empty() ? ref("x") : ref(by)}, {"y"}));
  s.program.outputs = {"y"};
  s.inputs["x"] = std::move(x);
  return s;
}

float first(const JobResult& r) {
  return r.outputs.at(0).second.data_ptr<float>()[0];
}

TEST(CompileCache, AProgramSentAgainIsCompiledOnceAndRunsTheSame) {
  Engine e(make_backend("cpu", 1), two_tenants());
  Tenant t(two_tenants().tenants[0]);
  const uint64_t h0 = e.compile_cache().hits();
  EXPECT_FLOAT_EQ(first(run_job(e, t, scaled("p1", f32({2}, {3, 4})))), 9.f);
  EXPECT_EQ(e.compile_cache().hits(), h0);
  EXPECT_FLOAT_EQ(first(run_job(e, t, scaled("p1", f32({2}, {5, 6})))), 25.f);
  EXPECT_EQ(e.compile_cache().hits(), h0 + 1);
  EXPECT_EQ(e.compile_cache().size("t"), 1u);
  // Other input shapes: another entry; the first still there.
  EXPECT_FLOAT_EQ(first(run_job(e, t, scaled("p1", f32({3}, {2, 2, 2})))), 4.f);
  EXPECT_EQ(e.compile_cache().hits(), h0 + 1);
  EXPECT_EQ(e.compile_cache().size("t"), 2u);
  run_job(e, t, scaled("p1", f32({2}, {1, 1})));
  EXPECT_EQ(e.compile_cache().hits(), h0 + 2);
}

TEST(CompileCache, OneTenantsEntryNeverServesAnother) {
  Engine e(make_backend("cpu", 1), two_tenants());
  Tenant t(two_tenants().tenants[0]);
  Tenant u(two_tenants().tenants[1]);
  run_job(e, t, scaled("shared", f32({2}, {1, 2})));
  const uint64_t h = e.compile_cache().hits();
  EXPECT_FLOAT_EQ(first(run_job(e, u, scaled("shared", f32({2}, {7, 8})))), 49.f);
  EXPECT_EQ(e.compile_cache().hits(), h) << "u compiled its own";
  EXPECT_EQ(e.compile_cache().size("u"), 1u);
  EXPECT_EQ(e.compile_cache().size("t"), 1u);
}

TEST(CompileCache, AProgramReadingAStoredTensorIsCompiledEveryTime) {
  Engine e(make_backend("cpu", 1), two_tenants());
  Tenant t(two_tenants().tenants[0]);
  t.store.put("w", f32({2}, {2, 2}));
  EXPECT_FLOAT_EQ(first(run_job(e, t, scaled("reads-w", f32({2}, {3, 3}), "$stored/w"))), 6.f);
  EXPECT_EQ(e.compile_cache().size("t"), 0u);
  // w replaced, then of another shape, then gone: each run sees it as it is.
  t.store.put("w", f32({2}, {10, 10}));
  EXPECT_FLOAT_EQ(first(run_job(e, t, scaled("reads-w", f32({2}, {3, 3}), "$stored/w"))), 30.f);
  t.store.put("w", f32({1}, {5}));
  EXPECT_FLOAT_EQ(first(run_job(e, t, scaled("reads-w", f32({2}, {3, 3}), "$stored/w"))), 15.f);
  t.store.erase("w");
  EXPECT_THROW(run_job(e, t, scaled("reads-w", f32({2}, {3, 3}), "$stored/w")), Error);
  EXPECT_EQ(e.compile_cache().size("t"), 0u);
}

TEST(CompileCache, EachTenantKeepsItsMostRecentPrograms) {
  Engine e(make_backend("cpu", 1), two_tenants());
  Tenant t(two_tenants().tenants[0]);
  for (size_t i = 0; i < CompileCache::kPerTenant + 6; ++i) {
    run_job(e, t, scaled("p" + std::to_string(i), f32({1}, {1})));
  }
  EXPECT_EQ(e.compile_cache().size("t"), CompileCache::kPerTenant);
  const uint64_t h = e.compile_cache().hits();
  run_job(e, t, scaled("p0", f32({1}, {1})));  // the oldest: dropped
  EXPECT_EQ(e.compile_cache().hits(), h);
  run_job(e, t, scaled("p" + std::to_string(CompileCache::kPerTenant + 5), f32({1}, {1})));
  EXPECT_EQ(e.compile_cache().hits(), h + 1);
}

TEST(CompileCache, KeysNameEveryInputsMetaAndSkipWhatTheyCannotName) {
  TensorMeta a{DType::kFloat32, {2, 3}};
  TensorMeta b{DType::kInt64, {4}};
  const std::string k = CompileCache::key("sha", {{"a", a}, {"b", b}});
  EXPECT_NE(k, CompileCache::key("sha", {{"a", a}, {"b", TensorMeta{DType::kInt64, {5}}}}));
  EXPECT_NE(k, CompileCache::key("sha", {{"a", a}, {"b", TensorMeta{DType::kInt32, {4}}}}));
  EXPECT_NE(k, CompileCache::key("sha", {{"a", a}, {"c", b}}));
  EXPECT_NE(k, CompileCache::key("other", {{"a", a}, {"b", b}}));
  EXPECT_EQ(k, CompileCache::key("sha", {{"b", b}, {"a", a}}));
  EXPECT_EQ(CompileCache::key("", {{"a", a}}), "") << "no program digest: not kept";
  TensorMeta mx = a;
  mx.mx = std::make_shared<MxMeta>();
  EXPECT_EQ(CompileCache::key("sha", {{"a", mx}}), "") << "an MX input: compiled every time";
}

}  // namespace
}  // namespace tensord
