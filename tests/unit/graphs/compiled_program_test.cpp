#include "graphs/compiled_program.h"

#include <gtest/gtest.h>

#include "ops/error.h"
#include "tests/unit/graphs/program_builder.h"

namespace tensord {
namespace {
using namespace testing_util;

std::map<std::string, TensorMeta> x23() {
  return {{"x", TensorMeta{DType::kFloat32, {2, 3}}}};
}
const StoredLookup kNoStore = [](const std::string&) { return std::optional<Tensor>(); };

ErrorCode code_of(const Program& p, const std::map<std::string, TensorMeta>& in = x23(), std::string* node = nullptr) {
  try {
    compile_program(p, in, kNoStore);
  } catch (const Error& e) {
    if (node) *node = e.node();
    return e.code();
  }
  ADD_FAILURE() << "compiled without error";
  return ErrorCode::kInternal;
}

TEST(CompileProgram, OrdersNodesGivenOutOfOrder) {
  Program p;
  p.nodes.push_back(node("b", "mul", {ref("y"), ref("y")}, {"z"}));
  p.nodes.push_back(node("a", "add", {ref("x"), ref("x")}, {"y"}));
  p.outputs = {"z"};
  CompiledProgram cp = compile_program(p, x23(), kNoStore);
  ASSERT_EQ(cp.nodes.size(), 2u);
  EXPECT_EQ(cp.nodes[0].id, "a");
  EXPECT_EQ(cp.nodes[1].id, "b");
  const auto& z = cp.values[static_cast<size_t>(cp.outputs[0].second)].meta;
  EXPECT_EQ(z.dtype, DType::kFloat32);
  EXPECT_EQ(z.shape, (Shape{2, 3}));
}

TEST(CompileProgram, InfersBroadcastAndPromotion) {
  Program p;
  p.nodes.push_back(node("a", "add", {ref("x"), lit(Attr(int64_t{2}))}, {"y"}));
  p.nodes.push_back(node("b", "sum", {ref("y")}, {"s"}, {{"dim", lit(Attr(int64_t{-1}))}}));
  p.outputs = {"y", "s"};
  std::map<std::string, TensorMeta> in{{"x", TensorMeta{DType::kInt32, {4, 5}}}};
  CompiledProgram cp = compile_program(p, in, kNoStore);
  EXPECT_EQ(cp.values[static_cast<size_t>(cp.outputs[0].second)].meta.dtype, DType::kInt32);  // wrapped int keeps int32
  EXPECT_EQ(cp.values[static_cast<size_t>(cp.outputs[1].second)].meta.shape, (Shape{4}));
  EXPECT_EQ(cp.values[static_cast<size_t>(cp.outputs[1].second)].meta.dtype, DType::kInt64);  // sum of ints
}

TEST(CompileProgram, RejectsCycle) {
  Program p;
  p.nodes.push_back(node("a", "add", {ref("x"), ref("w")}, {"y"}));
  p.nodes.push_back(node("b", "neg", {ref("y")}, {"w"}));
  EXPECT_EQ(code_of(p), ErrorCode::kInvalidProgram);
}

TEST(CompileProgram, RejectsSelfLoop) {
  Program p;
  p.nodes.push_back(node("a", "add", {ref("x"), ref("y")}, {"y"}));
  EXPECT_EQ(code_of(p), ErrorCode::kInvalidProgram);
}

TEST(CompileProgram, RejectsDuplicateIdsAndValues) {
  Program p;
  p.nodes.push_back(node("a", "neg", {ref("x")}, {"y"}));
  p.nodes.push_back(node("a", "neg", {ref("x")}, {"z"}));
  EXPECT_EQ(code_of(p), ErrorCode::kInvalidProgram);
  Program q;
  q.nodes.push_back(node("a", "neg", {ref("x")}, {"y"}));
  q.nodes.push_back(node("b", "neg", {ref("x")}, {"y"}));
  EXPECT_EQ(code_of(q), ErrorCode::kInvalidProgram);
  Program r;  // output shadows an input
  r.nodes.push_back(node("a", "neg", {ref("x")}, {"x"}));
  EXPECT_EQ(code_of(r), ErrorCode::kInvalidProgram);
}

TEST(CompileProgram, UnknownReferenceNamesTheNode) {
  Program p;
  p.nodes.push_back(node("n7", "add", {ref("x"), ref("nope")}, {"y"}));
  std::string where;
  EXPECT_EQ(code_of(p, x23(), &where), ErrorCode::kInvalidProgram);
  EXPECT_EQ(where, "n7");
}

TEST(CompileProgram, UnknownOpSuggestsCloseNames) {
  Program p;
  p.nodes.push_back(node("n", "ad", {ref("x"), ref("x")}, {"y"}));
  try {
    compile_program(p, x23(), kNoStore);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnknownOp);
    EXPECT_NE(e.message().find("'add'"), std::string::npos) << e.message();
    EXPECT_EQ(e.node(), "n");
  }
}

TEST(CompileProgram, ShapeMismatchCarriesNode) {
  Program p;
  p.inputs = {{"x", TensorMeta{DType::kFloat32, {2, 3}}}, {"v", TensorMeta{DType::kFloat32, {4}}}};
  p.nodes.push_back(node("bad", "add", {ref("x"), ref("v")}, {"y"}));
  std::map<std::string, TensorMeta> in{{"x", p.inputs[0].meta}, {"v", p.inputs[1].meta}};
  std::string where;
  EXPECT_EQ(code_of(p, in, &where), ErrorCode::kShapeMismatch);
  EXPECT_EQ(where, "bad");
}

TEST(CompileProgram, ArgumentBindingErrors) {
  Program missing;
  missing.nodes.push_back(node("n", "add", {ref("x")}, {"y"}));
  EXPECT_EQ(code_of(missing), ErrorCode::kInvalidArgument);
  Program extra;
  extra.nodes.push_back(node("n", "neg", {ref("x"), ref("x"), ref("x")}, {"y"}));
  EXPECT_EQ(code_of(extra), ErrorCode::kInvalidArgument);
  Program kw;
  kw.nodes.push_back(node("n", "neg", {ref("x")}, {"y"}, {{"bogus", lit(Attr(int64_t{1}))}}));
  EXPECT_EQ(code_of(kw), ErrorCode::kInvalidArgument);
  Program twice;
  twice.nodes.push_back(node("n", "add", {ref("x"), ref("x")}, {"y"}, {{"other", ref("x")}}));
  EXPECT_EQ(code_of(twice), ErrorCode::kInvalidArgument);
  Program too_many_outputs;
  too_many_outputs.nodes.push_back(node("n", "neg", {ref("x")}, {"a", "b"}));
  EXPECT_EQ(code_of(too_many_outputs), ErrorCode::kInvalidArgument);
}

TEST(CompileProgram, DeclaredInputsMustMatch) {
  Program p;
  p.inputs = {{"x", TensorMeta{DType::kFloat32, {2, 3}}}};
  p.nodes.push_back(node("n", "neg", {ref("x")}, {"y"}));
  std::map<std::string, TensorMeta> wrong_dtype{{"x", TensorMeta{DType::kFloat64, {2, 3}}}};
  EXPECT_EQ(code_of(p, wrong_dtype), ErrorCode::kDtypeMismatch);
  std::map<std::string, TensorMeta> wrong_shape{{"x", TensorMeta{DType::kFloat32, {3, 2}}}};
  EXPECT_EQ(code_of(p, wrong_shape), ErrorCode::kShapeMismatch);
  EXPECT_EQ(code_of(p, {}), ErrorCode::kBadRequest);
  std::map<std::string, TensorMeta> extra = x23();
  extra["q"] = TensorMeta{DType::kFloat32, {1}};
  EXPECT_EQ(code_of(p, extra), ErrorCode::kBadRequest);
}

TEST(CompileProgram, StoredReferences) {
  Tensor w = f32({3}, {1, 2, 3});
  StoredLookup lookup = [&](const std::string& n) { return n == "w" ? std::optional<Tensor>(w) : std::nullopt; };
  Program p;
  p.nodes.push_back(node("n", "add", {ref("x"), ref("$stored/w")}, {"y"}));
  CompiledProgram cp = compile_program(p, x23(), lookup);
  EXPECT_EQ(cp.nodes.size(), 1u);
  Program q;
  q.nodes.push_back(node("n", "add", {ref("x"), ref("$stored/missing")}, {"y"}));
  try {
    compile_program(q, x23(), lookup);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
}

TEST(CompileProgram, OutputsMustExistOnce) {
  Program p;
  p.nodes.push_back(node("n", "neg", {ref("x")}, {"y"}));
  p.outputs = {"nope"};
  EXPECT_EQ(code_of(p), ErrorCode::kInvalidProgram);
  // A value listed twice is valid (API.md 4: a scan body returns its carry
  // as its y too); outputs stay positional.
  p.outputs = {"y", "y"};
  CompiledProgram cp = compile_program(p, x23(), kNoStore);
  ASSERT_EQ(cp.outputs.size(), 2u);
  EXPECT_EQ(cp.outputs[0].second, cp.outputs[1].second);
}

TEST(CompileProgram, MemoryPlanFreesAfterLastUse) {
  // x -> a -> b -> c: at most two 2x3 float intermediates live at once.
  Program p;
  p.nodes.push_back(node("a", "neg", {ref("x")}, {"a1"}));
  p.nodes.push_back(node("b", "neg", {ref("a1")}, {"b1"}));
  p.nodes.push_back(node("c", "neg", {ref("b1")}, {"c1"}));
  p.outputs = {"c1"};
  CompiledProgram cp = compile_program(p, x23(), kNoStore);
  EXPECT_EQ(cp.peak_bytes, 2 * 24);
  EXPECT_EQ(cp.values[static_cast<size_t>(cp.by_name.at("a1"))].last_use, 1);
}

}  // namespace
}  // namespace tensord
