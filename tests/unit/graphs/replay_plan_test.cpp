// The replay plan (graphs/replay_plan.h): the same results as
// execute_program, no allocation at replay, static buffers shared by
// lifetime and by graphs of one pool, outputs and stored writes that outlive
// the next replay, 409 on another shape.
#include "graphs/replay_plan.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <random>

#include "graphs/executor.h"
#include "graphs/graph_pool.h"
#include "ops/error.h"
#include "ops/memory_account.h"
#include "tests/unit/graphs/counting_backend.h"
#include "tests/unit/graphs/program_builder.h"

namespace tensord {
namespace {
using namespace testing_util;

Tensor random_f32(Shape s, std::mt19937& rng) {
  Tensor t = Tensor::empty_host(DType::kFloat32, std::move(s));
  std::normal_distribution<float> d;
  for (int64_t i = 0; i < t.numel(); ++i) t.data_ptr<float>()[i] = d(rng);
  return t;
}

std::mt19937& rng_for(int seed) {
  thread_local std::mt19937 rng;
  rng.seed(static_cast<unsigned>(seed));
  return rng;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// A plan over its own pool and input buffers, as GraphStore::capture builds it.
struct Captured {
  std::shared_ptr<const CompiledProgram> cp;
  std::map<std::string, Tensor> buffers;
  std::shared_ptr<GraphPool> pool;
  std::unique_ptr<ReplayPlan> plan;
};

struct PlanFixture {
  CountingBackend backend;
  std::shared_ptr<MemoryAccount> acct = std::make_shared<MemoryAccount>("t");

  ExecOptions opts() {
    ExecOptions o;
    o.ctx.backend = &backend;
    o.ctx.account = acct;
    o.ctx.pool = &backend.pool();
    return o;
  }

  Captured capture(const Program& p, const std::map<std::string, TensorMeta>& in, const StoredLookup& stored = nullptr,
                   std::shared_ptr<GraphPool> pool = nullptr) {
    Captured c;
    c.cp = std::make_shared<const CompiledProgram>(compile_program(p, in, stored));
    for (const auto& [name, id] : c.cp->inputs) {
      const TensorMeta& m = c.cp->values[static_cast<size_t>(id)].meta;
      c.buffers.emplace(name, Tensor::empty(&backend, Device{}, m.dtype, m.shape, acct));
    }
    c.pool = pool ? pool : std::make_shared<GraphPool>(&backend, Device{}, acct);
    c.plan = std::make_unique<ReplayPlan>(c.cp, c.buffers, *c.pool, &backend, Device{});
    return c;
  }

  // Runs both ways and expects bit-identical outputs (same kernels).
  void expect_same(Captured& c, const std::map<std::string, Tensor>& in) {
    ExecResult want = execute_program(*c.cp, in, opts());
    ExecResult got = c.plan->run(in, opts());
    ASSERT_EQ(got.outputs.size(), want.outputs.size());
    for (size_t i = 0; i < want.outputs.size(); ++i) {
      EXPECT_EQ(got.outputs[i].first, want.outputs[i].first);
      EXPECT_TRUE(same_bytes(got.outputs[i].second, want.outputs[i].second))
          << "output " << want.outputs[i].first << ": " << got.outputs[i].second.meta().str() << " vs "
          << want.outputs[i].second.meta().str();
    }
  }
};

// 40 nodes: elementwise chain, broadcasting, reductions folded back in.
Program elementwise_program() {
  Program p;
  std::string cur = "x";
  for (int i = 0; i < 40; ++i) {
    const std::string id = "n" + std::to_string(i), out = "v" + std::to_string(i);
    switch (i % 5) {
      case 0:
        p.nodes.push_back(node(id, "mul", {ref(cur), lit(Attr(0.5))}, {out}));
        break;
      case 1:
        p.nodes.push_back(node(id, "add", {ref(cur), ref("b")}, {out}));  // b: [4] broadcast over [3, 4]
        break;
      case 2:
        p.nodes.push_back(node(id, "tanh", {ref(cur)}, {out}));
        break;
      case 3:
        p.nodes.push_back(node(id, "sum", {ref(cur)}, {"s" + std::to_string(i)}));
        p.nodes.push_back(node(id + "b", "sub", {ref(cur), ref("s" + std::to_string(i))}, {out}));
        break;
      default:
        p.nodes.push_back(node(id, "maximum", {ref(cur), ref("x")}, {out}));
    }
    cur = out;
  }
  p.nodes.push_back(node("m", "mean", {ref(cur)}, {"avg"}, {{"dim", lit(Attr(int64_t{1}))}}));
  p.outputs = {cur, "avg", "s3"};
  return p;
}

TEST(ReplayPlan, MatchesTheExecutorOnAnElementwiseProgram) {
  PlanFixture f;
  std::mt19937 rng(1);
  Captured c =
      f.capture(elementwise_program(), {{"x", meta(DType::kFloat32, {3, 4})}, {"b", meta(DType::kFloat32, {4})}});
  for (int i = 0; i < 5; ++i) {
    f.expect_same(c, {{"x", random_f32({3, 4}, rng)}, {"b", random_f32({4}, rng)}});
  }
  EXPECT_EQ(c.plan->general_instructions(), 0u);
  EXPECT_EQ(c.plan->slot_copies(), 0) << "every kernel wrote its result where the plan put it";
}

TEST(ReplayPlan, ReplayDoesNotAllocate) {
  PlanFixture f;
  std::mt19937 rng(2);
  Captured c =
      f.capture(elementwise_program(), {{"x", meta(DType::kFloat32, {3, 4})}, {"b", meta(DType::kFloat32, {4})}});
  std::map<std::string, Tensor> in = {{"x", random_f32({3, 4}, rng)}, {"b", random_f32({4}, rng)}};
  const int64_t after_capture = f.backend.allocations.load();
  for (int i = 0; i < 3; ++i) c.plan->run(in, f.opts());
  EXPECT_EQ(f.backend.allocations.load(), after_capture) << "a replay allocates nothing on the backend";
  const int64_t used = f.acct->used();
  execute_program(*c.cp, in, f.opts());
  EXPECT_GT(f.backend.allocations.load(), after_capture + 40) << "the counter sees the executor's allocations";
  EXPECT_EQ(f.acct->used(), used);
}

TEST(ReplayPlan, BuffersAreSharedByLifetime) {
  PlanFixture f;
  Program p;
  std::string cur = "x";
  for (int i = 0; i < 50; ++i) {
    p.nodes.push_back(node("n" + std::to_string(i), "neg", {ref(cur)}, {"v" + std::to_string(i)}));
    cur = "v" + std::to_string(i);
  }
  p.outputs = {cur};
  Captured c = f.capture(p, {{"x", meta(DType::kFloat32, {16})}});
  EXPECT_LE(c.plan->buffers(), 3u) << "a chain needs two buffers in turn (plus the output's)";
  EXPECT_EQ(c.pool->reserved(), static_cast<int64_t>(c.pool->chunks()) * 64);
  Tensor x = f32({16}, std::vector<float>(16, 1.5f));
  ExecResult r = c.plan->run({{"x", x}}, f.opts());
  EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[7], 1.5f);  // 50 negations
}

TEST(ReplayPlan, ViewsAliasesAndProgramInputsAsOutputs) {
  PlanFixture f;
  Program p;
  p.nodes.push_back(node("r", "reshape", {ref("x"), lit(Attr(std::vector<int64_t>{4, 3}))}, {"y"}));  // a view of x
  p.nodes.push_back(node("t", "to", {ref("y")}, {"z"}, {{"dtype", ref("float32")}}));  // returns its input
  p.nodes.push_back(node("m", "mul", {ref("z"), lit(Attr(2.0))}, {"w"}));
  p.nodes.push_back(node("e", "linalg.eigh", {ref("s")}, {"ev", "evec"}));  // two results
  p.outputs = {"y", "z", "w", "x", "ev", "evec"};
  Captured c = f.capture(p, {{"x", meta(DType::kFloat32, {3, 4})}, {"s", meta(DType::kFloat32, {2, 2})}});
  std::mt19937 rng(3);
  for (int i = 0; i < 3; ++i) {
    f.expect_same(c, {{"x", random_f32({3, 4}, rng)}, {"s", f32({2, 2}, {2.f + i, 1.f, 1.f, 3.f})}});
  }
  EXPECT_GT(c.plan->slot_copies(), 0) << "reshape's view and to's alias were copied into their buffers";
}

TEST(ReplayPlan, OutputsSurviveTheNextReplay) {
  PlanFixture f;
  Program p;
  p.nodes.push_back(node("a", "add", {ref("x"), lit(Attr(1.0))}, {"y"}));
  p.outputs = {"y", "x"};
  Captured c = f.capture(p, {{"x", meta(DType::kFloat32, {4})}});
  ExecResult first = c.plan->run({{"x", f32({4}, {1, 2, 3, 4})}}, f.opts());
  ExecResult second = c.plan->run({{"x", f32({4}, {10, 20, 30, 40})}}, f.opts());
  EXPECT_FLOAT_EQ(first.outputs[0].second.data_ptr<float>()[3], 5.f);
  EXPECT_FLOAT_EQ(first.outputs[1].second.data_ptr<float>()[3], 4.f) << "an input returned as output is a copy";
  EXPECT_FLOAT_EQ(second.outputs[0].second.data_ptr<float>()[3], 41.f);
  for (const auto& [name, t] : first.outputs) {
    for (const auto& [in, buf] : c.buffers) EXPECT_NE(t.storage(), buf.storage()) << name;
  }
}

TEST(ReplayPlan, InputsLoadedByTheCallerAreUsedInPlace) {
  PlanFixture f;
  Program p;
  p.nodes.push_back(node("a", "neg", {ref("x")}, {"y"}));
  p.outputs = {"y"};
  Captured c = f.capture(p, {{"x", meta(DType::kFloat32, {2})}});
  Tensor& buf = c.buffers.at("x");
  buf.data_ptr<float>()[0] = 3.f;
  buf.data_ptr<float>()[1] = -1.f;
  ExecResult r = c.plan->run(c.buffers, f.opts());
  EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[0], -3.f);
  EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[1], 1.f);
}

TEST(ReplayPlan, AnotherShapeOrDtypeIsConflict) {
  PlanFixture f;
  Program p;
  p.nodes.push_back(node("a", "neg", {ref("x")}, {"y"}));
  p.outputs = {"y"};
  Captured c = f.capture(p, {{"x", meta(DType::kFloat32, {2})}});
  for (Tensor bad : {f32({3}, {1, 2, 3}), Tensor::zeros_host(DType::kFloat64, {2})}) {
    try {
      c.plan->run({{"x", bad}}, f.opts());
      FAIL() << "accepted " << bad.meta().str();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kConflict);
    }
  }
  try {
    c.plan->run({}, f.opts());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
  }
}

// cond on the sign of sum(x), and a while_loop doubling x n times: each
// runs its subprograms as plans of their own (graphs/control_plan.h).
TEST(ReplayPlan, ControlFlowRunsItsSubprogramsAsPlansAndMatches) {
  PlanFixture f;
  Program p;
  p.nodes.push_back(node("s", "sum", {ref("x")}, {"t"}));
  p.nodes.push_back(node("g", "gt", {ref("t"), lit(Attr(0.0))}, {"pr"}));
  Node c = node("c", "cond", {ref("pr"), ref("x")}, {"y"});
  c.subprograms["then"] =
      sub({{"a", meta(DType::kFloat32, {3})}}, {node("m", "mul", {ref("a"), lit(Attr(2.0))}, {"r"})}, {"r"});
  c.subprograms["else"] = sub({{"a", meta(DType::kFloat32, {3})}}, {node("n", "neg", {ref("a")}, {"r"})}, {"r"});
  p.nodes.push_back(c);
  Node w = node("l", "while_loop", {ref("i"), ref("y"), ref("n")}, {"i2", "x2", "n2"});
  std::vector<ProgramInput> in = {
      {"i", meta(DType::kInt64, {})}, {"x", meta(DType::kFloat32, {3})}, {"n", meta(DType::kInt64, {})}};
  w.subprograms["cond"] = sub(in, {node("c", "lt", {ref("i"), ref("n")}, {"b"})}, {"b"});
  w.subprograms["body"] = sub(
      in,
      {node("a", "add", {ref("i"), lit(Attr(int64_t{1}))}, {"j"}), node("m", "mul", {ref("x"), lit(Attr(2.0))}, {"y"})},
      {"j", "y", "n"});
  p.nodes.push_back(w);
  p.nodes.push_back(node("o", "add", {ref("x2"), ref("x")}, {"out"}));
  p.outputs = {"out", "y", "i2"};
  Captured cap =
      f.capture(p, {{"x", meta(DType::kFloat32, {3})}, {"i", meta(DType::kInt64, {})}, {"n", meta(DType::kInt64, {})}});
  EXPECT_EQ(cap.plan->general_instructions(), 2u);
  EXPECT_EQ(cap.plan->control_plans(), 2u);
  EXPECT_GT(cap.plan->extra_bytes(), 0);
  auto i64 = [](int64_t v) {
    Tensor t = Tensor::empty_host(DType::kInt64, {});
    *t.data_ptr<int64_t>() = v;
    return t;
  };
  std::mt19937 rng(4);
  for (int k = 0; k < 6; ++k) {
    Tensor x = random_f32({3}, rng);
    for (int64_t j = 0; j < 3; ++j) x.data_ptr<float>()[j] += (k % 2 ? 3.f : -3.f);
    f.expect_same(cap, {{"x", x}, {"i", i64(0)}, {"n", i64(k)}});
  }
  ExecResult r = cap.plan->run({{"x", f32({3}, {1, 1, 1})}, {"i", i64(0)}, {"n", i64(3)}}, f.opts());
  EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[0], 17.f);  // 2 * 2^3 + 1
  r = cap.plan->run({{"x", f32({3}, {-1, -1, -1})}, {"i", i64(0)}, {"n", i64(1)}}, f.opts());
  EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[0], 1.f);  // -(-1) * 2 - 1
}

Tensor i64(int64_t v) {
  Tensor t = Tensor::empty_host(DType::kInt64, {});
  *t.data_ptr<int64_t>() = v;
  return t;
}

// The carries of the loops below: i (int64), x and y (float32[2]), n (int64).
std::vector<ProgramInput> loop_carries(const std::string& x, const std::string& y) {
  return {{"i", meta(DType::kInt64, {})},
          {x, meta(DType::kFloat32, {2})},
          {y, meta(DType::kFloat32, {2})},
          {"n", meta(DType::kInt64, {})}};
}

std::map<std::string, TensorMeta> metas_of(const std::vector<ProgramInput>& in) {
  std::map<std::string, TensorMeta> m;
  for (const auto& i : in) m.emplace(i.name, i.meta);
  return m;
}

// while i < n: (a, b) = (b, a + b), and a cond in the body halves b when it
// passes 100: swapped carries, a nested control plan, many trips.
Program fibonacci_program() {
  const std::vector<ProgramInput> in = loop_carries("a", "b");
  Node w = node("l", "while_loop", {ref("i"), ref("a"), ref("b"), ref("n")}, {"i2", "a2", "b2", "n2"});
  w.subprograms["cond"] = sub(in, {node("c", "lt", {ref("i"), ref("n")}, {"go"})}, {"go"});
  Node half = node("h", "cond", {ref("big"), ref("s")}, {"s2"});
  half.subprograms["then"] =
      sub({{"v", meta(DType::kFloat32, {2})}}, {node("d", "mul", {ref("v"), lit(Attr(0.5))}, {"r"})}, {"r"});
  half.subprograms["else"] = sub({{"v", meta(DType::kFloat32, {2})}}, {}, {"v"});
  w.subprograms["body"] =
      sub(in,
          {node("inc", "add", {ref("i"), lit(Attr(int64_t{1}))}, {"j"}), node("s", "add", {ref("a"), ref("b")}, {"s"}),
           node("m", "amax", {ref("s")}, {"mx"}), node("g", "gt", {ref("mx"), lit(Attr(100.0))}, {"big"}), half},
          {"j", "b", "s2", "n"});
  Program p;
  p.nodes.push_back(w);
  p.outputs = {"i2", "a2", "b2"};
  return p;
}

TEST(ReplayPlan, LoopsWithSwappedCarriesAndNestedCondMatchTheExecutor) {
  PlanFixture f;
  Captured cap = f.capture(fibonacci_program(), metas_of(loop_carries("a", "b")));
  EXPECT_EQ(cap.plan->control_plans(), 1u);
  for (int64_t n : {0, 1, 2, 7, 30, 200}) {
    f.expect_same(cap, {{"i", i64(0)}, {"a", f32({2}, {0, 1})}, {"b", f32({2}, {1, -2})}, {"n", i64(n)}});
  }
  ExecResult r =
      cap.plan->run({{"i", i64(0)}, {"a", f32({2}, {0, 0})}, {"b", f32({2}, {1, 1})}, {"n", i64(5)}}, f.opts());
  EXPECT_FLOAT_EQ(r.outputs[1].second.data_ptr<float>()[0], 5.f);  // fib: 0 1 1 2 3 5 8
  EXPECT_FLOAT_EQ(r.outputs[2].second.data_ptr<float>()[0], 8.f);

  // A pure swap: (i, x, y) -> (i + 1, y, x), both results other carries.
  const std::vector<ProgramInput> sw = loop_carries("x", "y");
  Node w = node("l", "while_loop", {ref("i"), ref("x"), ref("y"), ref("n")}, {"i2", "x2", "y2", "n2"});
  w.subprograms["cond"] = sub(sw, {node("c", "lt", {ref("i"), ref("n")}, {"go"})}, {"go"});
  w.subprograms["body"] = sub(sw, {node("inc", "add", {ref("i"), lit(Attr(int64_t{1}))}, {"j"})}, {"j", "y", "x", "n"});
  Program swap;
  swap.nodes.push_back(w);
  swap.outputs = {"x2", "y2"};
  Captured s = f.capture(swap, metas_of(sw));
  for (int64_t n : {0, 1, 2, 3}) {
    r = s.plan->run({{"i", i64(0)}, {"x", f32({2}, {1, 2})}, {"y", f32({2}, {3, 4})}, {"n", i64(n)}}, f.opts());
    EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[1], n % 2 ? 4.f : 2.f) << n;
    EXPECT_FLOAT_EQ(r.outputs[1].second.data_ptr<float>()[1], n % 2 ? 2.f : 4.f) << n;
  }
}

TEST(ReplayPlan, ControlPlansStopAtMaxItersAndOnCancellation) {
  PlanFixture f;
  Program p = fibonacci_program();
  p.nodes[0].kwargs.emplace_back("max_iters", lit(Attr(int64_t{10})));
  Captured cap = f.capture(p, metas_of(loop_carries("a", "b")));
  const std::map<std::string, Tensor> in = {
      {"i", i64(0)}, {"a", f32({2}, {0, 0})}, {"b", f32({2}, {1, 1})}, {"n", i64(1000)}};
  try {
    cap.plan->run(in, f.opts());
    FAIL() << "expected deadline_exceeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded);
    EXPECT_EQ(e.node(), "l");
    EXPECT_NE(std::string(e.what()).find("max_iters=10"), std::string::npos) << e.what();
  }
  std::atomic<bool> cancel{false};
  ExecOptions o = f.opts();
  o.ctx.cancelled = &cancel;
  int trips = 0;
  o.on_node = [&](const CompiledProgram&, const BoundNode& b, double, auto, auto) {
    if (b.id == "inc" && ++trips == 3) cancel = true;
  };
  try {
    cap.plan->run(in, o);
    FAIL() << "expected cancelled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCancelled);
    EXPECT_EQ(trips, 3) << "stopped at the next trip";
  }
}

TEST(ReplayPlan, SubprogramsThatWriteStoredTensorsKeepTheGeneralPath) {
  PlanFixture f;
  Tensor w = f32({2}, {5, 6});
  StoredLookup lookup = [&](const std::string& n) { return n == "w" ? std::optional<Tensor>(w) : std::nullopt; };
  Program p;
  Node c = node("c", "cond", {ref("pr"), ref("x")}, {"y"});
  c.subprograms["then"] =
      sub({{"a", meta(DType::kFloat32, {2})}},
          {node("cp", "copy_", {ref("$stored/w"), ref("a")}, {}), node("n", "neg", {ref("a")}, {"r"})}, {"r"});
  c.subprograms["else"] = sub({{"a", meta(DType::kFloat32, {2})}}, {}, {"a"});
  p.nodes.push_back(c);
  p.outputs = {"y"};
  Captured cap = f.capture(p, {{"pr", meta(DType::kBool, {})}, {"x", meta(DType::kFloat32, {2})}}, lookup);
  EXPECT_EQ(cap.plan->control_plans(), 0u);
  Tensor yes = Tensor::empty_host(DType::kBool, {});
  *yes.data_ptr<bool>() = true;
  ExecOptions o = f.opts();
  o.stored_read = lookup;
  ExecResult r = cap.plan->run({{"pr", yes}, {"x", f32({2}, {1, 2})}}, o);
  ASSERT_EQ(r.stored_writes.size(), 1u);
  EXPECT_FLOAT_EQ(r.stored_writes[0].second.data_ptr<float>()[1], 2.f);
  EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[1], -2.f);
}

TEST(ReplayPlan, StoredWritesAreCopiesOfTheStaticBuffers) {
  PlanFixture f;
  Tensor w = f32({2}, {5, 6});
  StoredLookup lookup = [&](const std::string& n) { return n == "w" ? std::optional<Tensor>(w) : std::nullopt; };
  Program p;
  p.nodes.push_back(node("m", "mul", {ref("x"), lit(Attr(3.0))}, {"y"}));
  p.nodes.push_back(node("c", "copy_", {ref("$stored/w"), ref("y")}, {}));
  p.outputs = {"y"};
  Captured c = f.capture(p, {{"x", meta(DType::kFloat32, {2})}}, lookup);
  ExecOptions o = f.opts();
  o.stored_read = lookup;
  ExecResult first = c.plan->run({{"x", f32({2}, {1, 2})}}, o);
  ExecResult second = c.plan->run({{"x", f32({2}, {7, 8})}}, o);
  ASSERT_EQ(first.stored_writes.size(), 1u);
  EXPECT_EQ(first.stored_writes[0].first, "w");
  EXPECT_FLOAT_EQ(first.stored_writes[0].second.data_ptr<float>()[1], 6.f) << "not overwritten by the next replay";
  EXPECT_FLOAT_EQ(second.stored_writes[0].second.data_ptr<float>()[1], 24.f);
  EXPECT_FLOAT_EQ(w.data_ptr<float>()[1], 6.f) << "the stored value is untouched until commit";
}

TEST(ReplayPlan, GraphsSharingAPoolShareItsChunksAndStayCorrect) {
  PlanFixture f;
  Program a;
  a.nodes.push_back(node("m", "mul", {ref("x"), lit(Attr(3.0))}, {"y"}));
  a.nodes.push_back(node("a", "add", {ref("y"), lit(Attr(1.0))}, {"z"}));
  a.outputs = {"z"};
  Program b;
  b.nodes.push_back(node("n", "neg", {ref("x")}, {"y"}));
  b.nodes.push_back(node("s", "sum", {ref("y")}, {"t"}));
  b.outputs = {"y", "t"};
  const int64_t before = f.acct->used();
  {
    Captured ga = f.capture(a, {{"x", meta(DType::kFloat32, {64})}});
    const size_t chunks_a = ga.pool->chunks();
    const int64_t reserved_a = ga.pool->reserved();
    Captured gb = f.capture(b, {{"x", meta(DType::kFloat32, {64})}}, nullptr, ga.pool);
    EXPECT_EQ(ga.pool->chunks(), chunks_a) << "b's two buffers fit in a's chunks";
    EXPECT_EQ(ga.pool->reserved(), reserved_a);
    EXPECT_EQ(f.acct->used() - before, reserved_a + 2 * 64 * 4) << "the pool once, plus each graph's input buffer";
    std::mt19937 rng(5);
    for (int i = 0; i < 10; ++i) {
      Tensor x = random_f32({64}, rng);
      ExecResult ra = ga.plan->run({{"x", x}}, f.opts());
      ExecResult rb = gb.plan->run({{"x", x}}, f.opts());
      for (int64_t j = 0; j < 64; ++j) {
        ASSERT_FLOAT_EQ(ra.outputs[0].second.data_ptr<float>()[j], x.data_ptr<float>()[j] * 3.f + 1.f);
        ASSERT_FLOAT_EQ(rb.outputs[0].second.data_ptr<float>()[j], -x.data_ptr<float>()[j]);
      }
    }
  }
  EXPECT_EQ(f.acct->used(), before) << "graphs, buffers and pool freed";
}

TEST(ReplayPlan, CancellationStopsAtAnInstruction) {
  PlanFixture f;
  Program p;
  p.nodes.push_back(node("a", "neg", {ref("x")}, {"y"}));
  p.outputs = {"y"};
  Captured c = f.capture(p, {{"x", meta(DType::kFloat32, {2})}});
  std::atomic<bool> cancel{true};
  ExecOptions o = f.opts();
  o.ctx.cancelled = &cancel;
  try {
    c.plan->run({{"x", f32({2}, {1, 2})}}, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCancelled);
    EXPECT_EQ(e.node(), "a");
  }
}

TEST(ReplayPlan, ReportsEveryInstructionToOnNode) {
  PlanFixture f;
  Captured c =
      f.capture(elementwise_program(), {{"x", meta(DType::kFloat32, {3, 4})}, {"b", meta(DType::kFloat32, {4})}});
  std::vector<std::string> seen;
  ExecOptions o = f.opts();
  o.on_node = [&](const CompiledProgram&, const BoundNode& b, double s, auto, auto) {
    EXPECT_GE(s, 0.0);
    seen.push_back(b.id);
  };
  std::mt19937 rng(6);
  for (int run = 0; run < 2; ++run) {  // the recording run, then recorded loops
    seen.clear();
    c.plan->run({{"x", random_f32({3, 4}, rng)}, {"b", random_f32({4}, rng)}}, o);
    ASSERT_EQ(seen.size(), c.cp->nodes.size());
    EXPECT_EQ(seen.front(), c.cp->nodes.front().id);
    EXPECT_EQ(seen.back(), c.cp->nodes.back().id);
  }
  EXPECT_GT(c.plan->recorded_instructions(), 0u);
}

// ---- recorded loops (ops/recorded_block.h)

Tensor random_i32(Shape s, std::mt19937& rng, int lo, int hi) {
  Tensor t = Tensor::empty_host(DType::kInt32, std::move(s));
  std::uniform_int_distribution<int> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_ptr<int32_t>()[i] = d(rng);
  return t;
}

TEST(ReplayPlan, RecordsElementwiseLoopsAndFullReductions) {
  PlanFixture f;
  std::mt19937 rng(7);
  Captured c =
      f.capture(elementwise_program(), {{"x", meta(DType::kFloat32, {3, 4})}, {"b", meta(DType::kFloat32, {4})}});
  EXPECT_EQ(c.plan->recorded_instructions(), 0u) << "nothing is recorded before the first run";
  // Every node but the mean over dim 1 (a partial fold, not one loop): the
  // add broadcasting b over rows, the float64 literal of mul (held in the
  // block) and the full sums included. Bit-identical to the executor on
  // every later run.
  for (int i = 0; i < 4; ++i) f.expect_same(c, {{"x", random_f32({3, 4}, rng)}, {"b", random_f32({4}, rng)}});
  EXPECT_EQ(c.plan->recorded_instructions(), c.plan->instructions() - 1);
}

TEST(ReplayPlan, RecordedLoopsOverIntegersBoolsAndNarrowFloats) {
  PlanFixture f;
  Program p;
  p.nodes.push_back(node("a", "add", {ref("i"), lit(Attr(int64_t{3}))}, {"i1"}));
  p.nodes.push_back(node("m", "mul", {ref("i1"), ref("k")}, {"i2"}));  // k: int32[1], broadcast
  p.nodes.push_back(node("g", "gt", {ref("i2"), lit(Attr(int64_t{0}))}, {"pos"}));
  p.nodes.push_back(node("w", "where", {ref("pos"), ref("i2"), ref("i")}, {"i3"}));
  p.nodes.push_back(node("x", "amax", {ref("i3")}, {"top"}));
  p.nodes.push_back(node("s", "sum", {ref("pos")}, {"npos"}));               // bool -> int64
  p.nodes.push_back(node("h", "add", {ref("hf"), lit(Attr(0.5))}, {"h1"}));  // float16: staged casts, not recorded
  p.nodes.push_back(node("c", "clamp", {ref("h1")}, {"h2"}, {{"min", lit(Attr(-1.0))}, {"max", lit(Attr(1.0))}}));
  p.outputs = {"i3", "top", "npos", "h2"};
  Captured c = f.capture(
      p, {{"i", meta(DType::kInt32, {37})}, {"k", meta(DType::kInt32, {1})}, {"hf", meta(DType::kFloat16, {5})}});
  for (int r = 0; r < 4; ++r) {
    Tensor hf = Tensor::empty_host(DType::kFloat16, {5});
    for (int j = 0; j < 5; ++j) hf.data_ptr<uint16_t>()[j] = static_cast<uint16_t>(0x3c00 + r * 97 + j * 311);
    f.expect_same(
        c, {{"i", random_i32({37}, rng_for(r), -50, 50)}, {"k", random_i32({1}, rng_for(r + 9), -3, 3)}, {"hf", hf}});
  }
  EXPECT_GE(c.plan->recorded_instructions(), 6u);
  EXPECT_LT(c.plan->recorded_instructions(), c.plan->instructions());
}

TEST(ReplayPlan, RecordsBroadcastsOverTwoDimsOnly) {
  // [3, 1] + [4] walks rows (a column and a row broadcast): recorded; a
  // broadcast that needs three dims ([2, 3, 4] + [2, 1, 4]) keeps the kernel.
  PlanFixture f;
  Program p;
  p.nodes.push_back(node("a", "add", {ref("col"), ref("row")}, {"grid"}));
  p.nodes.push_back(node("b", "mul", {ref("cube"), ref("slab")}, {"c2"}));
  p.nodes.push_back(node("s", "sub", {ref("grid"), ref("row")}, {"g2"}));
  p.outputs = {"grid", "c2", "g2"};
  Captured c = f.capture(p, {{"col", meta(DType::kFloat32, {3, 1})},
                             {"row", meta(DType::kFloat32, {4})},
                             {"cube", meta(DType::kFloat32, {2, 3, 4})},
                             {"slab", meta(DType::kFloat32, {2, 1, 4})}});
  std::mt19937 rng(10);
  for (int r = 0; r < 3; ++r) {
    f.expect_same(c, {{"col", random_f32({3, 1}, rng)},
                      {"row", random_f32({4}, rng)},
                      {"cube", random_f32({2, 3, 4}, rng)},
                      {"slab", random_f32({2, 1, 4}, rng)}});
  }
  EXPECT_EQ(c.plan->recorded_instructions(), 2u);
}

TEST(ReplayPlan, IntegerDivisionChecksItsDivisorOnEveryReplay) {
  // floor division reads the divisor for zeros before its loop: that check
  // is data, so the node is never reduced to its loop.
  PlanFixture f;
  Program p;
  p.nodes.push_back(node("d", "div", {ref("x"), ref("y")}, {"q"}, {{"rounding_mode", lit(Attr("floor"))}}));
  p.outputs = {"q"};
  Captured c = f.capture(p, {{"x", meta(DType::kInt32, {4})}, {"y", meta(DType::kInt32, {4})}});
  std::mt19937 rng(8);
  for (int r = 0; r < 2; ++r) f.expect_same(c, {{"x", random_i32({4}, rng, -9, 9)}, {"y", random_i32({4}, rng, 1, 5)}});
  EXPECT_EQ(c.plan->recorded_instructions(), 0u);
  Tensor zero = random_i32({4}, rng, 1, 5);
  zero.data_ptr<int32_t>()[2] = 0;
  try {
    c.plan->run({{"x", random_i32({4}, rng, -9, 9)}, {"y", zero}}, f.opts());
    FAIL() << "division by zero replayed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

TEST(ReplayPlan, RecordedLoopsOfLargeTensorsSplitOverThePool) {
  // Past the engine's grain the kernel split its loop over the pool; the
  // recording replays the same split (and the same results).
  PlanFixture f;
  Program p;
  p.nodes.push_back(node("a", "add", {ref("x"), lit(Attr(1.0))}, {"y"}));
  p.nodes.push_back(node("t", "tanh", {ref("y")}, {"z"}));
  p.nodes.push_back(node("m", "maximum", {ref("z"), ref("x")}, {"w"}));
  p.outputs = {"w"};
  Captured c = f.capture(p, {{"x", meta(DType::kFloat32, {100003})}});
  std::mt19937 rng(9);
  for (int r = 0; r < 3; ++r) f.expect_same(c, {{"x", random_f32({100003}, rng)}});
  EXPECT_EQ(c.plan->recorded_instructions(), 3u);
}

}  // namespace
}  // namespace tensord
