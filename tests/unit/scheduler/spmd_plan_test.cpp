// The SPMD planner (scheduler/spmd_plan.h): shards, per-rank compiles,
// gathered extents, checks across ranks and the replicated values.
#include "scheduler/spmd_plan.h"

#include <gtest/gtest.h>

#include "graphs/graph_pool.h"
#include "graphs/replay_plan.h"
#include "ops/dist/dist_ops.h"
#include "ops/error.h"
#include "tests/unit/graphs/program_builder.h"

namespace tensord {
namespace {

using namespace testing_util;

Tensor arange_f32(int64_t n) {
  Tensor t = Tensor::empty_host(DType::kFloat32, {n});
  for (int64_t i = 0; i < n; ++i) static_cast<float*>(t.data())[i] = static_cast<float>(i);
  return t;
}

JobSpec sharded(Program p, int64_t n, int R) {
  dist::link_dist_ops();
  JobSpec s;
  s.program = std::move(p);
  s.spmd.emplace();
  s.spmd->count = R;
  s.spmd->inputs["x"].shard = arange_f32(n);
  return s;
}

ErrorCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kInternal;
}

TEST(SpmdPlan, UnevenShardsSplitAsTensorSplitAndGatherBackToTheWhole) {
  Program p;
  p.nodes = {node("g", "dist.all_gather", {ref("x")}, {"g"}), node("h", "dist.all_gather", {ref("g")}, {"h"}),
             node("m", "neg", {ref("x")}, {"m"})};
  p.outputs = {"h", "m"};
  SpmdPlan plan = plan_spmd(sharded(p, 7, 3), nullptr, 3);
  ASSERT_EQ(plan.inputs.size(), 3u);
  EXPECT_EQ(plan.inputs[0].at("x").shape(), Shape({3}));
  EXPECT_EQ(plan.inputs[1].at("x").shape(), Shape({2}));
  EXPECT_EQ(plan.inputs[2].at("x").shape(), Shape({2}));
  EXPECT_EQ(static_cast<float*>(plan.inputs[1].at("x").data())[0], 3.0f);
  // 7 gathered, then 7 on every rank gathered again: 21, on every rank.
  for (const auto& cp : plan.programs) {
    EXPECT_EQ(cp->values[static_cast<size_t>(cp->by_name.at("g"))].meta.shape, Shape({7}));
    EXPECT_EQ(cp->values[static_cast<size_t>(cp->by_name.at("h"))].meta.shape, Shape({21}));
  }
  EXPECT_TRUE(plan.is_replicated_output("h"));
  EXPECT_FALSE(plan.is_replicated_output("m"));
  EXPECT_EQ(plan.group, "world");
}

TEST(SpmdPlan, RanksThatDisagreeAtACollectiveAreNamedBeforeAnythingRuns) {
  Program p;
  p.nodes = {node("a", "dist.all_reduce", {ref("x")}, {"y"})};
  p.outputs = {"y"};
  try {
    plan_spmd(sharded(p, 7, 2), nullptr, 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kShapeMismatch);
    EXPECT_EQ(e.node(), "a");
  }
  EXPECT_NO_THROW(plan_spmd(sharded(p, 8, 2), nullptr, 2));
}

TEST(SpmdPlan, ReplicatedByConstruction) {
  Program p;
  p.nodes = {node("s", "dist.reduce_scatter", {ref("x")}, {"s"}), node("b", "dist.broadcast", {ref("s")}, {"b"}),
             node("k", "mul", {ref("b"), lit(2.0)}, {"k"}), node("t", "dist.all_to_all", {ref("k")}, {"t"})};
  p.outputs = {"s", "b", "k", "t"};
  JobSpec spec = sharded(p, 8, 2);
  // A replicated input: the same 8 floats on both ranks.
  spec.inputs["x"] = spec.spmd->inputs["x"].shard;
  spec.spmd->inputs.clear();
  SpmdPlan plan = plan_spmd(spec, nullptr, 2);
  EXPECT_FALSE(plan.is_replicated_output("s"));
  EXPECT_TRUE(plan.is_replicated_output("b"));
  EXPECT_TRUE(plan.is_replicated_output("k"));
  EXPECT_FALSE(plan.is_replicated_output("t"));
}

TEST(SpmdPlan, MalformedGroupsAndStoresOfPerRankValues) {
  Program p;
  p.nodes = {node("m", "neg", {ref("x")}, {"m"})};
  p.outputs = {"m"};
  EXPECT_EQ(code_of([&] { plan_spmd(sharded(p, 4, 3), nullptr, 2); }), ErrorCode::kBadRequest);
  JobSpec sub = sharded(p, 4, 2);
  sub.spmd->count = 0;
  sub.spmd->ranks = {1, 1};
  EXPECT_EQ(code_of([&] { plan_spmd(sub, nullptr, 2); }), ErrorCode::kBadRequest);
  sub.spmd->ranks = {1, 0};
  SpmdPlan plan = plan_spmd(sub, nullptr, 2);
  EXPECT_EQ(plan.group, "ranks:1,0");
  JobSpec st = sharded(p, 4, 2);
  st.store["m"] = "w";
  EXPECT_EQ(code_of([&] { plan_spmd(st, nullptr, 2); }), ErrorCode::kInvalidArgument);
  JobSpec bad_dim = sharded(p, 4, 2);
  bad_dim.spmd->inputs["x"].dim = 1;
  EXPECT_EQ(code_of([&] { plan_spmd(bad_dim, nullptr, 2); }), ErrorCode::kBadRequest);
}

// A graph captured with ranks: every member compiled over its declared
// metas (uneven parts gathered to the whole on each), the per_rank count
// checked, and the members bound in the group's inference context.
TEST(SpmdPlan, DeclaredMembersOfAGraph) {
  dist::link_dist_ops();
  Program p;
  p.nodes = {node("g", "dist.all_gather", {ref("x")}, {"g"}),
             node("b", "dist.broadcast", {ref("w")}, {"b"}, {{"src", lit(Attr(int64_t{1}))}})};
  p.outputs = {"g", "b"};
  SpmdPlan plan;
  plan.ranks = {0, 1};
  plan.group = spmd_group_name(plan.ranks, 2);
  const std::map<std::string, TensorMeta> same = {{"w", TensorMeta{DType::kFloat32, {2}}}};
  const std::map<std::string, std::vector<TensorMeta>> parts = {
      {"x", {TensorMeta{DType::kFloat32, {3}}, TensorMeta{DType::kFloat32, {2}}}}};
  compile_spmd_declared(plan, p, same, parts, nullptr);
  ASSERT_EQ(plan.programs.size(), 2u);
  for (const auto& cp : plan.programs) {
    EXPECT_EQ(cp->values[static_cast<size_t>(cp->by_name.at("g"))].meta.shape, Shape({5}));
  }
  EXPECT_EQ(plan.gather_extents.at("g"), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(plan.group, "world");

  // Binding a member infers its nodes again: broadcast's src 1 needs the
  // group of 2 it was compiled for.
  GraphPool pool(nullptr, Device{}, nullptr);
  std::map<std::string, Tensor> buffers = {{"x", Tensor::empty_host(DType::kFloat32, {3})},
                                           {"w", Tensor::empty_host(DType::kFloat32, {2})}};
  EXPECT_ANY_THROW(ReplayPlan(plan.programs[0], buffers, pool, nullptr, Device{}));
  std::unique_ptr<ReplayPlan> bound;
  in_spmd_infer_scope(
      plan, [&] { bound = std::make_unique<ReplayPlan>(plan.programs[0], buffers, pool, nullptr, Device{}); });
  EXPECT_EQ(bound->instructions(), 2u);

  const std::map<std::string, std::vector<TensorMeta>> three = {
      {"x", {parts.at("x")[0], parts.at("x")[1], parts.at("x")[1]}}};
  EXPECT_EQ(code_of([&] { compile_spmd_declared(plan, p, same, three, nullptr); }), ErrorCode::kBadRequest);
  const std::map<std::string, std::vector<TensorMeta>> dtypes = {
      {"x", {TensorMeta{DType::kFloat32, {3}}, TensorMeta{DType::kFloat64, {2}}}}};
  EXPECT_EQ(code_of([&] { compile_spmd_declared(plan, p, same, dtypes, nullptr); }), ErrorCode::kDtypeMismatch);
}

// A replay of such a graph: its inputs split per member, the replicated
// values found for the inputs this replay gives per rank, "ranks" checked
// against the group.
TEST(SpmdPlan, ReplayOfAGraphSplitsInputsAndFindsTheReplicatedValues) {
  dist::link_dist_ops();
  Program p;
  p.nodes = {node("m", "mul", {ref("x"), lit(2.0)}, {"m"})};
  p.outputs = {"m"};
  SpmdPlan graph;
  graph.ranks = {1, 0};
  graph.group = spmd_group_name(graph.ranks, 2);
  EXPECT_EQ(graph.group, "ranks:1,0");
  compile_spmd_declared(graph, p, {}, {{"x", {TensorMeta{DType::kFloat32, {2}}, TensorMeta{DType::kFloat32, {2}}}}},
                        nullptr);
  JobSpec replicated;
  replicated.inputs["x"] = arange_f32(2);
  SpmdPlan r = plan_spmd_replay(replicated, graph.ranks, graph.group, graph.programs, 2);
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_TRUE(r.is_replicated_output("m"));
  JobSpec sharded_x = sharded(p, 4, 0);
  sharded_x.spmd->count = 0;
  r = plan_spmd_replay(sharded_x, graph.ranks, graph.group, graph.programs, 2);
  EXPECT_FALSE(r.is_replicated_output("m"));
  EXPECT_EQ(static_cast<float*>(r.inputs[1].at("x").data())[0], 2.0f);
  sharded_x.store["m"] = "w";
  EXPECT_EQ(code_of([&] { plan_spmd_replay(sharded_x, graph.ranks, graph.group, graph.programs, 2); }),
            ErrorCode::kInvalidArgument);
  JobSpec other_group = sharded(p, 4, 2);  // "ranks": 2 is the world, [0, 1]: not this graph's [1, 0]
  EXPECT_EQ(code_of([&] { plan_spmd_replay(other_group, graph.ranks, graph.group, graph.programs, 2); }),
            ErrorCode::kBadRequest);
  other_group.spmd->count = 0;
  other_group.spmd->ranks = {1, 0};
  EXPECT_NO_THROW(plan_spmd_replay(other_group, graph.ranks, graph.group, graph.programs, 2));
}

}  // namespace
}  // namespace tensord
