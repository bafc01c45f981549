// Control flow (API.md 4.2): every op against hand-computed results, nesting,
// signature mismatches rejected at compile, runaway loops, cancellation.
#include "graphs/control_flow.h"

#include <gtest/gtest.h>

#include <thread>

#include "graphs/executor.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/error.h"
#include "ops/memory_account.h"
#include "tests/unit/graphs/exec_fixture.h"
#include "tests/unit/graphs/program_builder.h"

namespace tensord {
namespace {
using namespace testing_util;

Tensor scalar_bool(bool v) {
  Tensor t = Tensor::empty_host(DType::kBool, {});
  *t.data_ptr<bool>() = v;
  return t;
}
Tensor scalar_i64(int64_t v) {
  Tensor t = Tensor::empty_host(DType::kInt64, {});
  *t.data_ptr<int64_t>() = v;
  return t;
}

std::vector<float> floats(const Tensor& t) {
  const float* p = t.data_ptr<float>();
  return std::vector<float>(p, p + t.numel());
}

ErrorCode compile_error(const Program& p, const std::map<std::string, TensorMeta>& in, std::string* node = nullptr) {
  try {
    compile_program(p, in, nullptr);
  } catch (const Error& e) {
    if (node) *node = e.node();
    return e.code();
  }
  return ErrorCode::kInternal;  // "no error" marker for the tests
}

// cond(pred, x): then x*2, else -x.
Node cond_node() {
  Node n = node("c", "cond", {ref("p"), ref("x")}, {"y"});
  n.subprograms["then"] =
      sub({{"a", meta(DType::kFloat32, {3})}}, {node("m", "mul", {ref("a"), lit(Attr(2.0))}, {"r"})}, {"r"});
  n.subprograms["else"] = sub({{"a", meta(DType::kFloat32, {3})}}, {node("n", "neg", {ref("a")}, {"r"})}, {"r"});
  return n;
}

TEST(ControlFlow, CondTakesTheBranchTheDataSays) {
  Fixture f;
  Program p;
  p.nodes.push_back(cond_node());
  p.outputs = {"y"};
  Tensor x = f32({3}, {1, 2, 3});
  CompiledProgram cp = compile_program(p, {{"p", meta(DType::kBool, {})}, {"x", x.meta()}}, nullptr);
  EXPECT_EQ(cp.values[static_cast<size_t>(cp.outputs[0].second)].meta.shape, Shape({3}));
  auto r = execute_program(cp, {{"p", scalar_bool(true)}, {"x", x}}, f.opts());
  EXPECT_EQ(floats(r.outputs[0].second), std::vector<float>({2, 4, 6}));
  r = execute_program(cp, {{"p", scalar_bool(false)}, {"x", x}}, f.opts());
  EXPECT_EQ(floats(r.outputs[0].second), std::vector<float>({-1, -2, -3}));
}

TEST(ControlFlow, CondBranchSignatureMismatchRejectedAtCompile) {
  Program p;
  Node n = cond_node();
  // else returns a float64 value: different dtype.
  n.subprograms["else"] = sub({{"a", meta(DType::kFloat32, {3})}},
                              {node("n", "to", {ref("a")}, {"r"}, {{"dtype", ref("float64")}})}, {"r"});
  p.nodes.push_back(n);
  p.outputs = {"y"};
  std::string where;
  EXPECT_EQ(compile_error(p, {{"p", meta(DType::kBool, {})}, {"x", meta(DType::kFloat32, {3})}}, &where),
            ErrorCode::kInvalidProgram);
  EXPECT_EQ(where, "c");
  // A subprogram whose declared input does not match the operand.
  Program q;
  Node m = cond_node();
  m.subprograms["then"] = sub({{"a", meta(DType::kFloat32, {4})}}, {node("m", "neg", {ref("a")}, {"r"})}, {"r"});
  q.nodes.push_back(m);
  q.outputs = {"y"};
  EXPECT_EQ(compile_error(q, {{"p", meta(DType::kBool, {})}, {"x", meta(DType::kFloat32, {3})}}, &where),
            ErrorCode::kInvalidProgram);
  EXPECT_EQ(where, "c");
}

TEST(ControlFlow, CondPredAndMissingBranch) {
  Program p;
  p.nodes.push_back(cond_node());
  p.outputs = {"y"};
  EXPECT_EQ(compile_error(p, {{"p", meta(DType::kFloat32, {})}, {"x", meta(DType::kFloat32, {3})}}),
            ErrorCode::kInvalidArgument);
  Program q;
  Node n = cond_node();
  n.subprograms.erase("else");
  q.nodes.push_back(n);
  EXPECT_EQ(compile_error(q, {{"p", meta(DType::kBool, {})}, {"x", meta(DType::kFloat32, {3})}}),
            ErrorCode::kInvalidProgram);
}

// while i < n: i += 1, x *= 2
Node while_node(int64_t max_iters = -1) {
  Node n = node("l", "while_loop", {ref("i"), ref("x"), ref("n")}, {"i2", "x2", "n2"});
  if (max_iters >= 0) n.kwargs.emplace_back("max_iters", lit(Attr(max_iters)));
  std::vector<ProgramInput> in = {
      {"i", meta(DType::kInt64, {})}, {"x", meta(DType::kFloat32, {2})}, {"n", meta(DType::kInt64, {})}};
  n.subprograms["cond"] = sub(in, {node("c", "lt", {ref("i"), ref("n")}, {"b"})}, {"b"});
  n.subprograms["body"] = sub(
      in,
      {node("a", "add", {ref("i"), lit(Attr(int64_t{1}))}, {"j"}), node("m", "mul", {ref("x"), lit(Attr(2.0))}, {"y"})},
      {"j", "y", "n"});
  return n;
}

TEST(ControlFlow, WhileLoopRunsUntilCondIsFalse) {
  Fixture f;
  Program p;
  p.nodes.push_back(while_node());
  p.outputs = {"i2", "x2"};
  Tensor x = f32({2}, {1, -3});
  std::map<std::string, TensorMeta> in = {
      {"i", meta(DType::kInt64, {})}, {"x", x.meta()}, {"n", meta(DType::kInt64, {})}};
  CompiledProgram cp = compile_program(p, in, nullptr);
  auto r = execute_program(cp, {{"i", scalar_i64(0)}, {"x", x}, {"n", scalar_i64(5)}}, f.opts());
  EXPECT_EQ(*r.outputs[0].second.data_ptr<int64_t>(), 5);
  EXPECT_EQ(floats(r.outputs[1].second), std::vector<float>({32, -96}));
  r = execute_program(cp, {{"i", scalar_i64(7)}, {"x", x}, {"n", scalar_i64(5)}}, f.opts());
  EXPECT_EQ(*r.outputs[0].second.data_ptr<int64_t>(), 7) << "zero iterations";
}

TEST(ControlFlow, WhileLoopBodyMustKeepCarries) {
  Program p;
  Node n = while_node();
  std::vector<ProgramInput> in = {
      {"i", meta(DType::kInt64, {})}, {"x", meta(DType::kFloat32, {2})}, {"n", meta(DType::kInt64, {})}};
  // body changes x's dtype: float32 * float64 tensor -> float64.
  n.subprograms["body"] = sub(in, {node("s", "sum", {ref("x")}, {"y"})}, {"i", "y", "n"});
  p.nodes.push_back(n);
  std::string where;
  EXPECT_EQ(compile_error(p, {{"i", in[0].meta}, {"x", in[1].meta}, {"n", in[2].meta}}, &where),
            ErrorCode::kInvalidProgram);
  EXPECT_EQ(where, "l");
  // cond must return a bool scalar.
  Program q;
  Node m = while_node();
  m.subprograms["cond"] = sub(in, {node("c", "neg", {ref("x")}, {"b"})}, {"b"});
  q.nodes.push_back(m);
  EXPECT_EQ(compile_error(q, {{"i", in[0].meta}, {"x", in[1].meta}, {"n", in[2].meta}}), ErrorCode::kInvalidProgram);
}

TEST(ControlFlow, RunawayWhileLoopStoppedAtMaxIters) {
  Fixture f;
  Program p;
  p.nodes.push_back(while_node(10));
  p.outputs = {"i2"};
  Tensor x = f32({2}, {1, 1});
  CompiledProgram cp =
      compile_program(p, {{"i", meta(DType::kInt64, {})}, {"x", x.meta()}, {"n", meta(DType::kInt64, {})}}, nullptr);
  try {
    execute_program(cp, {{"i", scalar_i64(0)}, {"x", x}, {"n", scalar_i64(1000)}}, f.opts());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded);
    EXPECT_EQ(e.node(), "l");
  }
  // Exactly max_iters iterations is fine.
  auto r = execute_program(cp, {{"i", scalar_i64(0)}, {"x", x}, {"n", scalar_i64(10)}}, f.opts());
  EXPECT_EQ(*r.outputs[0].second.data_ptr<int64_t>(), 10);
}

TEST(ControlFlow, CancellationReachesARunningLoop) {
  Fixture f;
  Program p;
  p.nodes.push_back(while_node());  // default max_iters 1e6; n huge
  p.outputs = {"i2"};
  Tensor x = f32({2}, {0, 0});
  CompiledProgram cp =
      compile_program(p, {{"i", meta(DType::kInt64, {})}, {"x", x.meta()}, {"n", meta(DType::kInt64, {})}}, nullptr);
  std::atomic<bool> cancel{false};
  ExecOptions o = f.opts();
  o.ctx.cancelled = &cancel;
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cancel = true;
  });
  auto t0 = std::chrono::steady_clock::now();
  try {
    execute_program(cp, {{"i", scalar_i64(0)}, {"x", x}, {"n", scalar_i64(INT64_MAX)}}, o);
    t.join();
    FAIL();
  } catch (const Error& e) {
    t.join();
    EXPECT_EQ(e.code(), ErrorCode::kCancelled);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(ControlFlow, ScanCarriesAndStacksAlongDim) {
  Fixture f;
  // cumulative sum along dim 1 of a [2, 3]: carry [2], y = carry + x.
  for (bool reverse : {false, true}) {
    Program p;
    Node n = node("s", "scan", {ref("init"), ref("xs")}, {"c", "ys"},
                  {{"dim", lit(Attr(int64_t{1}))}, {"reverse", lit(Attr(reverse))}});
    n.subprograms["body"] =
        sub({{"c", meta(DType::kFloat32, {2})}, {"x", meta(DType::kFloat32, {2})}},
            {node("a", "add", {ref("c"), ref("x")}, {"c2"}), node("m", "mul", {ref("c2"), lit(Attr(1.0))}, {"y"})},
            {"c2", "y"});
    p.nodes.push_back(n);
    p.outputs = {"c", "ys"};
    Tensor init = f32({2}, {0, 100});
    Tensor xs = f32({2, 3}, {1, 2, 3, 4, 5, 6});
    CompiledProgram cp = compile_program(p, {{"init", init.meta()}, {"xs", xs.meta()}}, nullptr);
    auto r = execute_program(cp, {{"init", init}, {"xs", xs}}, f.opts());
    EXPECT_EQ(floats(r.outputs[0].second), std::vector<float>({6, 115}));
    EXPECT_EQ(r.outputs[1].second.shape(), Shape({2, 3}));
    if (!reverse) {
      EXPECT_EQ(floats(r.outputs[1].second), std::vector<float>({1, 3, 6, 104, 109, 115}));
    } else {
      EXPECT_EQ(floats(r.outputs[1].second), std::vector<float>({6, 5, 3, 115, 111, 106}));
    }
  }
}

TEST(ControlFlow, MapOverDimZeroWithExtraArgs) {
  Fixture f;
  Program p;
  Node n = node("m", "map", {ref("xs"), ref("b")}, {"ys"});
  n.subprograms["body"] =
      sub({{"x", meta(DType::kFloat32, {2})}, {"b", meta(DType::kFloat32, {})}},
          {node("s", "sum", {ref("x")}, {"t"}), node("a", "add", {ref("t"), ref("b")}, {"y"})}, {"y"});
  p.nodes.push_back(n);
  p.outputs = {"ys"};
  Tensor xs = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor b = f32({}, {10});
  CompiledProgram cp = compile_program(p, {{"xs", xs.meta()}, {"b", b.meta()}}, nullptr);
  auto r = execute_program(cp, {{"xs", xs}, {"b", b}}, f.opts());
  EXPECT_EQ(r.outputs[0].second.shape(), Shape({3}));
  EXPECT_EQ(floats(r.outputs[0].second), std::vector<float>({13, 17, 21}));
}

TEST(ControlFlow, AssociativeScanInclusive) {
  Fixture f;
  for (bool reverse : {false, true}) {
    Program p;
    Node n = node("a", "associative_scan", {ref("xs")}, {"ys"},
                  {{"dim", lit(Attr(int64_t{0}))}, {"reverse", lit(Attr(reverse))}});
    n.subprograms["combine_fn"] = sub({{"l", meta(DType::kFloat32, {2})}, {"r", meta(DType::kFloat32, {2})}},
                                      {node("m", "maximum", {ref("l"), ref("r")}, {"o"})}, {"o"});
    p.nodes.push_back(n);
    p.outputs = {"ys"};
    Tensor xs = f32({4, 2}, {1, 5, 3, 2, 2, 7, 4, 1});
    CompiledProgram cp = compile_program(p, {{"xs", xs.meta()}}, nullptr);
    auto r = execute_program(cp, {{"xs", xs}}, f.opts());
    if (!reverse) {
      EXPECT_EQ(floats(r.outputs[0].second), std::vector<float>({1, 5, 3, 5, 3, 7, 4, 7}));
    } else {
      EXPECT_EQ(floats(r.outputs[0].second), std::vector<float>({4, 7, 4, 7, 4, 7, 4, 1}));
    }
  }
}

TEST(ControlFlow, NestedCondInWhileInScan) {
  Fixture f;
  // scan over xs [3]: body(c, x): while k < 3: cond(x > 0, k): then c+x else c-x ... carry updated.
  std::vector<ProgramInput> win = {
      {"k", meta(DType::kInt64, {})}, {"c", meta(DType::kFloat32, {})}, {"x", meta(DType::kFloat32, {})}};
  Node cnd = node("cn", "cond", {ref("pos"), ref("c"), ref("x")}, {"c3"});
  std::vector<ProgramInput> cin = {{"c", meta(DType::kFloat32, {})}, {"x", meta(DType::kFloat32, {})}};
  cnd.subprograms["then"] = sub(cin, {node("a", "add", {ref("c"), ref("x")}, {"r"})}, {"r"});
  cnd.subprograms["else"] = sub(cin, {node("s", "sub", {ref("c"), ref("x")}, {"r"})}, {"r"});
  Node wl = node("w", "while_loop", {ref("k0"), ref("c"), ref("x")}, {"k1", "c1", "x1"});
  wl.subprograms["cond"] = sub(win, {node("lt", "lt", {ref("k"), lit(Attr(int64_t{3}))}, {"b"})}, {"b"});
  wl.subprograms["body"] = sub(win,
                               {node("inc", "add", {ref("k"), lit(Attr(int64_t{1}))}, {"k2"}),
                                node("gt", "gt", {ref("x"), lit(Attr(0.0))}, {"pos"}), cnd},
                               {"k2", "c3", "x"});
  Node sc = node("s", "scan", {ref("init"), ref("xs")}, {"c", "ys"});
  ArgExpr k0;
  k0.kind = ArgExpr::Kind::kTensor;
  k0.tensor = scalar_i64(0);
  wl.args[0] = k0;  // an inline tensor operand
  sc.subprograms["body"] = sub({{"c", meta(DType::kFloat32, {})}, {"x", meta(DType::kFloat32, {})}},
                               {wl, node("cp", "mul", {ref("c1"), lit(Attr(1.0))}, {"y"})}, {"c1", "y"});
  Program p;
  p.nodes.push_back(sc);
  p.outputs = {"c", "ys"};
  Tensor init = f32({}, {0});
  Tensor xs = f32({3}, {1, -2, 4});
  CompiledProgram cp = compile_program(p, {{"init", init.meta()}, {"xs", xs.meta()}}, nullptr);
  auto r = execute_program(cp, {{"init", init}, {"xs", xs}}, f.opts());
  // c: 0 -> +3*1 = 3 -> -3*(-2) = 9 -> +3*4 = 21.
  EXPECT_EQ(floats(r.outputs[0].second), std::vector<float>({21}));
  EXPECT_EQ(floats(r.outputs[1].second), std::vector<float>({3, 9, 21}));
}

TEST(ControlFlow, MalformedNodesRejected) {
  // scan with one arg, unknown kwarg, subprogram on an ordinary op.
  Program p;
  Node n = node("s", "scan", {ref("x")}, {"y"});
  n.subprograms["body"] = sub({{"a", meta(DType::kFloat32, {2})}}, {}, {"a"});
  p.nodes.push_back(n);
  EXPECT_EQ(compile_error(p, {{"x", meta(DType::kFloat32, {2, 2})}}), ErrorCode::kInvalidArgument);
  Program q;
  Node m = node("m", "map", {ref("x")}, {"y"}, {{"bogus", lit(Attr(int64_t{1}))}});
  m.subprograms["body"] = sub({{"a", meta(DType::kFloat32, {2})}}, {}, {"a"});
  q.nodes.push_back(m);
  EXPECT_EQ(compile_error(q, {{"x", meta(DType::kFloat32, {2, 2})}}), ErrorCode::kInvalidArgument);
  Program r;
  Node o = node("n", "neg", {ref("x")}, {"y"});
  o.subprograms["body"] = sub({{"a", meta(DType::kFloat32, {2})}}, {}, {"a"});
  r.nodes.push_back(o);
  EXPECT_EQ(compile_error(r, {{"x", meta(DType::kFloat32, {2, 2})}}), ErrorCode::kInvalidProgram);
  // a body with an unknown op inside: the inner error keeps its code and node.
  Program s;
  Node mm = node("m", "map", {ref("x")}, {"y"});
  mm.subprograms["body"] = sub({{"a", meta(DType::kFloat32, {2})}}, {node("z", "nope", {ref("a")}, {"b"})}, {"b"});
  s.nodes.push_back(mm);
  std::string where;
  EXPECT_EQ(compile_error(s, {{"x", meta(DType::kFloat32, {2, 2})}}, &where), ErrorCode::kUnknownOp);
  EXPECT_EQ(where, "z");
}

}  // namespace
}  // namespace tensord
