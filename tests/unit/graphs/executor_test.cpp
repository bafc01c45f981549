#include "graphs/executor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ops/backend.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/error.h"
#include "ops/memory_account.h"
#include "tests/unit/graphs/exec_fixture.h"
#include "tests/unit/graphs/program_builder.h"

namespace tensord {
namespace {
using namespace testing_util;

TEST(Executor, RunsAChainAndReleasesIntermediates) {
  Fixture f;
  Program p;
  p.nodes.push_back(node("a", "add", {ref("x"), ref("x")}, {"y"}));
  p.nodes.push_back(node("b", "mul", {ref("y"), lit(Attr(3.0))}, {"z"}));
  p.nodes.push_back(node("c", "sum", {ref("z")}, {"s"}));
  p.outputs = {"z", "s"};
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  CompiledProgram cp = compile_program(p, {{"x", x.meta()}}, nullptr);
  ExecResult r = execute_program(cp, {{"x", x}}, f.opts());
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_EQ(r.outputs[0].first, "z");
  const float* z = r.outputs[0].second.data_ptr<float>();
  EXPECT_FLOAT_EQ(z[3], 24.f);
  EXPECT_FLOAT_EQ(*r.outputs[1].second.data_ptr<float>(), 60.f);
  r = ExecResult{};
  EXPECT_EQ(f.acct->used(), 0) << "every intermediate and output released";
}

TEST(Executor, InputsMustMatchCompiledMetas) {
  Fixture f;
  Program p;
  p.nodes.push_back(node("a", "neg", {ref("x")}, {"y"}));
  Tensor x = f32({2}, {1, 2});
  CompiledProgram cp = compile_program(p, {{"x", x.meta()}}, nullptr);
  Tensor other = f32({1}, {1});
  try {
    execute_program(cp, {{"x", other}}, f.opts());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kConflict);
  }
}

TEST(Executor, CancellationStopsAtNodeBoundary) {
  Fixture f;
  Program p;
  p.nodes.push_back(node("a", "neg", {ref("x")}, {"y"}));
  Tensor x = f32({2}, {1, 2});
  CompiledProgram cp = compile_program(p, {{"x", x.meta()}}, nullptr);
  std::atomic<bool> cancel{true};
  ExecOptions o = f.opts();
  o.ctx.cancelled = &cancel;
  try {
    execute_program(cp, {{"x", x}}, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCancelled);
    EXPECT_EQ(e.node(), "a");
  }
}

TEST(Executor, DeadlineInThePast) {
  Fixture f;
  Program p;
  p.nodes.push_back(node("a", "neg", {ref("x")}, {"y"}));
  Tensor x = f32({2}, {1, 2});
  CompiledProgram cp = compile_program(p, {{"x", x.meta()}}, nullptr);
  ExecOptions o = f.opts();
  o.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  try {
    execute_program(cp, {{"x", x}}, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded);
  }
}

TEST(Executor, InPlaceWriteToStoredIsReturnedNotApplied) {
  Fixture f;
  Tensor w = f32({2}, {5, 6});
  StoredLookup lookup = [&](const std::string& n) { return n == "w" ? std::optional<Tensor>(w) : std::nullopt; };
  Program p;
  p.nodes.push_back(node("c", "copy_", {ref("$stored/w"), ref("x")}, {}));
  Tensor x = f32({2}, {1, 2});
  CompiledProgram cp = compile_program(p, {{"x", x.meta()}}, lookup);
  ExecResult r = execute_program(cp, {{"x", x}}, f.opts());
  ASSERT_EQ(r.stored_writes.size(), 1u);
  EXPECT_EQ(r.stored_writes[0].first, "w");
  EXPECT_FLOAT_EQ(r.stored_writes[0].second.data_ptr<float>()[1], 2.f);
  EXPECT_FLOAT_EQ(w.data_ptr<float>()[1], 6.f) << "the stored value is untouched until commit";
}

TEST(Executor, KernelErrorCarriesNode) {
  Fixture f;
  Program p;
  p.nodes.push_back(node("e", "linalg.eigh", {ref("x")}, {"w", "v"}));
  Tensor x = f32({2, 2}, {1, NAN, NAN, 1});
  CompiledProgram cp = compile_program(p, {{"x", x.meta()}}, nullptr);
  try {
    execute_program(cp, {{"x", x}}, f.opts());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNumericalError);
    EXPECT_EQ(e.node(), "e");
  }
}

}  // namespace
}  // namespace tensord
