// GraphStore (graphs/graph_store.h): capture builds the replay plan over the
// graph's input buffers and its pool; graphs of one pool share its chunks;
// the tenant's memory is back where it was once every graph is erased.
#include "graphs/graph_store.h"

#include <gtest/gtest.h>

#include <optional>

#include "ops/error.h"
#include "ops/memory_account.h"
#include "tests/unit/graphs/counting_backend.h"
#include "tests/unit/graphs/program_builder.h"

namespace tensord {
namespace {
using namespace testing_util;

CompiledProgram affine(int64_t n) {
  Program p;
  p.nodes.push_back(node("m", "mul", {ref("x"), lit(Attr(3.0))}, {"y"}));
  p.nodes.push_back(node("a", "add", {ref("y"), lit(Attr(1.0))}, {"z"}));
  p.nodes.push_back(node("s", "sum", {ref("z")}, {"t"}));
  p.outputs = {"z", "t"};
  return compile_program(p, {{"x", TensorMeta{DType::kFloat32, {n}}}}, nullptr);
}

TEST(GraphStore, CaptureChargesBuffersAndPoolEraseReleasesThem) {
  CountingBackend backend;
  auto acct = std::make_shared<MemoryAccount>("t");
  GraphStore store;
  auto g1 = store.capture("t", acct, &backend, Device{}, affine(1024));
  ASSERT_TRUE(g1->plan);
  EXPECT_EQ(g1->plan->instructions(), 3u);
  EXPECT_EQ(g1->bytes(), acct->used());
  EXPECT_GE(g1->bytes(), 2 * 1024 * 4) << "input buffer + at least the z buffer";
  auto g2 = store.capture("t", acct, &backend, Device{}, affine(1024), g1->id);
  EXPECT_EQ(g2->pool, g1->pool);
  EXPECT_EQ(g2->pool_id, g1->id);
  EXPECT_EQ(acct->used(), g1->bytes() + g2->buffer_bytes) << "the second graph adds its input buffer only";
  try {
    store.capture("other", acct, &backend, Device{}, affine(4), g1->id);
    FAIL() << "another tenant's pool";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
  const int64_t pool_bytes = g1->pool->reserved();
  std::weak_ptr<GraphPool> pool = g1->pool;
  g1.reset();
  EXPECT_TRUE(store.erase("t", g2->pool_id));
  EXPECT_EQ(acct->used(), g2->buffer_bytes + pool_bytes) << "the pool lives on with g2";
  const std::string id2 = g2->id;
  g2.reset();
  EXPECT_TRUE(store.erase("t", id2));
  EXPECT_TRUE(pool.expired());
  EXPECT_EQ(acct->used(), 0);
}

// A while_loop's own plans (carries, pools) are the graph's bytes too.
TEST(GraphStore, ControlFlowPlansCountInTheGraphAndGoWithIt) {
  CountingBackend backend;
  auto acct = std::make_shared<MemoryAccount>("t");
  GraphStore store;
  const TensorMeta x{DType::kFloat32, {256}};
  Node w = node("l", "while_loop", {ref("x")}, {"y"});
  w.subprograms["cond"] =
      sub({{"v", x}}, {node("s", "sum", {ref("v")}, {"t"}), node("c", "lt", {ref("t"), lit(Attr(1e6))}, {"b"})}, {"b"});
  w.subprograms["body"] = sub({{"v", x}}, {node("m", "mul", {ref("v"), lit(Attr(2.0))}, {"r"})}, {"r"});
  Program p;
  p.nodes.push_back(w);
  p.outputs = {"y"};
  auto g = store.capture("t", acct, &backend, Device{}, compile_program(p, {{"x", x}}, nullptr));
  EXPECT_EQ(g->plan->control_plans(), 1u);
  EXPECT_GE(g->plan->extra_bytes(), 2 * 256 * 4) << "carries and their staging";
  EXPECT_EQ(g->bytes(), acct->used());
  const std::string id = g->id;
  g.reset();
  EXPECT_TRUE(store.erase("t", id));
  EXPECT_EQ(acct->used(), 0);
}

TEST(GraphStore, ReplayThroughLoadedBuffers) {
  CountingBackend backend;
  auto acct = std::make_shared<MemoryAccount>("t");
  GraphStore store;
  auto g = store.capture("t", acct, &backend, Device{}, affine(4));
  ExecOptions o;
  o.ctx.backend = &backend;
  o.ctx.account = acct;
  std::vector<std::map<std::string, Tensor>> ins;
  for (float v : {1.f, 2.f, 3.f}) ins.push_back({{"x", f32({4}, {v, v, v, v})}});
  const int64_t allocs = backend.allocations.load();
  for (const auto& in : ins) {
    g->plan->check_inputs(in);
    ExecResult r = g->plan->run(in, o);  // copies x into the static buffer
    const float v = in.at("x").data_ptr<float>()[0];
    EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[2], 3 * v + 1);
    EXPECT_FLOAT_EQ(*r.outputs[1].second.data_ptr<float>(), 4 * (3 * v + 1));
  }
  EXPECT_EQ(backend.allocations.load(), allocs);
  try {
    g->plan->check_inputs({{"x", f32({3}, {1, 2, 3})}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kConflict);
  }
  EXPECT_THROW(g->plan->check_inputs({}), Error);
  EXPECT_THROW(g->plan->check_inputs({{"x", f32({4}, {1, 2, 3, 4})}, {"y", f32({1}, {1})}}), Error);
}

TEST(GraphStore, NamesAreUniquePerTenantAndFreedOnErase) {
  CountingBackend backend;
  auto acct = std::make_shared<MemoryAccount>("t");
  GraphStore store;
  auto g = store.capture("t", acct, &backend, Device{}, affine(4), {}, "model");
  EXPECT_EQ(g->name, "model");
  EXPECT_EQ(store.find_by_name_or_id("t", "model"), g);
  EXPECT_EQ(store.find_by_name_or_id("t", g->id), g);
  EXPECT_EQ(store.find_by_name_or_id("other", "model"), nullptr) << "another tenant's name";
  EXPECT_EQ(store.find_by_name_or_id("t", "nope"), nullptr);
  const int64_t used = acct->used();
  try {
    store.capture("t", acct, &backend, Device{}, affine(4), {}, "model");
    FAIL() << "a duplicate name";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kConflict);
  }
  EXPECT_THROW(store.check_name_free("t", "model"), Error);
  EXPECT_NO_THROW(store.check_name_free("other", "model"));
  EXPECT_EQ(acct->used(), used) << "the refused capture holds no memory";
  EXPECT_EQ(store.size(), 1u);
  auto other = store.capture("other", acct, &backend, Device{}, affine(2), {}, "model");
  EXPECT_EQ(store.find_by_name_or_id("other", "model"), other);
  EXPECT_TRUE(store.erase("t", g->id));
  EXPECT_EQ(store.find_by_name_or_id("t", "model"), nullptr);
  auto again = store.capture("t", acct, &backend, Device{}, affine(8), {}, "model");
  EXPECT_EQ(store.find_by_name_or_id("t", "model"), again);
  EXPECT_EQ(store.find_by_name_or_id("other", "model"), other);
}

// The id is reserved before the program compiles: info() reports it as
// capturing (to its tenant only) until the capture ends, and a failed
// capture frees the id and the name.
TEST(GraphStore, InfoReportsACaptureInProgress) {
  CountingBackend backend;
  auto acct = std::make_shared<MemoryAccount>("t");
  GraphStore store;
  std::optional<GraphInfo> during, other_tenant;
  bool capturing = false;
  auto g = store.capture(
      "t", acct, &backend, Device{},
      [&] {
        during = store.info("t", "g-1");
        other_tenant = store.info("u", "g-1");
        capturing = store.capturing("t", "g-1");
        EXPECT_EQ(store.find("t", "g-1"), nullptr) << "not replayable while capturing";
        EXPECT_THROW(store.check_name_free("t", "m"), Error) << "the name is held from the start";
        return affine(16);
      },
      {}, "m");
  ASSERT_TRUE(during.has_value());
  EXPECT_TRUE(during->is_capturing);
  EXPECT_EQ(during->id, "g-1");
  EXPECT_EQ(during->name, "m");
  EXPECT_EQ(during->pool, "g-1");
  EXPECT_EQ(during->nodes, 0) << "not compiled yet";
  EXPECT_TRUE(capturing);
  EXPECT_FALSE(other_tenant.has_value());
  ASSERT_EQ(g->id, "g-1");
  auto after = store.info("t", g->id);
  ASSERT_TRUE(after.has_value());
  EXPECT_FALSE(after->is_capturing);
  EXPECT_EQ(after->nodes, 3);
  EXPECT_EQ(after->bytes, g->bytes());
  EXPECT_FALSE(store.capturing("t", g->id));

  // A capture that fails while compiling: its id and name are free again.
  std::optional<GraphInfo> failing;
  EXPECT_THROW(store.capture(
                   "t", acct, &backend, Device{},
                   [&]() -> CompiledProgram {
                     failing = store.info("t", "g-2");
                     throw Error(ErrorCode::kInvalidProgram, "bad");
                   },
                   g->id, "n"),
               Error);
  ASSERT_TRUE(failing.has_value());
  EXPECT_TRUE(failing->is_capturing);
  EXPECT_EQ(failing->pool, g->id) << "the pool it shares";
  EXPECT_FALSE(store.info("t", "g-2").has_value());
  EXPECT_FALSE(store.capturing("t", "g-2"));
  EXPECT_NO_THROW(store.check_name_free("t", "n"));
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(acct->used(), g->bytes()) << "the failed capture holds no memory";
}

// A graph captured with ranks: a member per rank, each with its own buffers
// and pool (the ranks replay at once), the graph's bytes their sum; its
// members' pools are its own.
TEST(GraphStore, SpmdMembersHaveTheirOwnBuffersAndPools) {
  CountingBackend backend;
  auto acct = std::make_shared<MemoryAccount>("t");
  GraphStore store;
  std::optional<GraphInfo> during;
  int scoped = 0;
  auto members = [&] {
    during = store.info("t", "g-1");
    std::vector<std::shared_ptr<const CompiledProgram>> v;
    v.push_back(std::make_shared<const CompiledProgram>(affine(64)));
    v.push_back(std::make_shared<const CompiledProgram>(affine(32)));  // another rank, other shapes
    return v;
  };
  auto scope = [&](const std::function<void()>& bind) {
    ++scoped;
    bind();
  };
  auto g = store.capture_spmd("t", acct, &backend, Device{}, members, scope, {1, 0}, "ranks:1,0");
  ASSERT_TRUE(during.has_value());
  EXPECT_EQ(during->ranks, (std::vector<int>{1, 0}));
  EXPECT_EQ(scoped, 2) << "each member bound inside the scope";
  ASSERT_TRUE(g->spmd);
  ASSERT_EQ(g->spmd->members.size(), 2u);
  const GraphMember& m0 = g->spmd->members[0];
  const GraphMember& m1 = g->spmd->members[1];
  EXPECT_NE(m0.pool, m1.pool);
  EXPECT_EQ(g->plan, m0.plan) << "the graph's own fields are its first member's";
  EXPECT_EQ(m0.buffers.at("x").shape(), Shape({64}));
  EXPECT_EQ(m1.buffers.at("x").shape(), Shape({32}));
  EXPECT_EQ(g->bytes(), m0.bytes() + m1.bytes());
  EXPECT_EQ(g->bytes(), acct->used());
  auto info = store.info("t", g->id);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->group, "ranks:1,0");
  EXPECT_EQ(info->ranks, (std::vector<int>{1, 0}));
  try {
    store.capture("t", acct, &backend, Device{}, affine(4), g->id);
    FAIL() << "a plain graph in an SPMD graph's pool";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
  }
  // A member count that is not the group's: nothing kept.
  auto one = [&] {
    std::vector<std::shared_ptr<const CompiledProgram>> v;
    v.push_back(std::make_shared<const CompiledProgram>(affine(4)));
    return v;
  };
  EXPECT_THROW(store.capture_spmd("t", acct, &backend, Device{}, one, nullptr, {0, 1}, "world"), Error);
  EXPECT_EQ(store.size(), 1u);
  const std::string id = g->id;
  g.reset();
  EXPECT_TRUE(store.erase("t", id));
  EXPECT_EQ(acct->used(), 0);
}

}  // namespace
}  // namespace tensord
