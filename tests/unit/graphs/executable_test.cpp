// The Executable pieces the engine composes (graphs/executable.h): the
// executor behind the interface, and the fallback wrapper a device replay
// uses instead of a flag (graphs/fallback_executable.h).
#include "graphs/fallback_executable.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "graphs/program_executable.h"
#include "ops/error.h"
#include "tests/unit/graphs/program_builder.h"

namespace tensord {
namespace {
using namespace testing_util;

// Counts its runs and throws `error` on each while it is set.
class Scripted final : public Executable {
 public:
  explicit Scripted(std::shared_ptr<const CompiledProgram> cp) : cp_(std::move(cp)) {}
  ExecResult run(const std::map<std::string, Tensor>&, const ExecOptions&) override {
    ++runs;
    if (error) throw *error;
    ExecResult r;
    r.outputs.emplace_back("from", f32({}, {1}));
    return r;
  }
  const CompiledProgram& program() const override { return *cp_; }
  int runs = 0;
  std::optional<Error> error;

 private:
  std::shared_ptr<const CompiledProgram> cp_;
};

std::shared_ptr<const CompiledProgram> doubling() {
  Program p;
  p.nodes.push_back(node("a", "add", {ref("x"), ref("x")}, {"y"}));
  p.outputs = {"y"};
  return std::make_shared<const CompiledProgram>(compile_program(p, {{"x", meta(DType::kFloat32, {2})}}, nullptr));
}

bool internal_or_unsupported(const Error& e) {
  return e.code() == ErrorCode::kInternal || e.code() == ErrorCode::kUnsupported;
}

TEST(ProgramExecutable, RunsTheExecutorOverItsProgram) {
  auto cp = doubling();
  ProgramExecutable exec(cp);
  EXPECT_EQ(&exec.program(), cp.get());
  EXPECT_TRUE(exec.commits());
  ExecOptions o;
  ExecResult r = exec.run({{"x", f32({2}, {1.5f, -2})}}, o);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].first, "y");
  EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[0], 3.f);
  EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[1], -4.f);
  EXPECT_FALSE(r.spmd);
  EXPECT_THROW(exec.run({{"x", f32({3}, {1, 2, 3})}}, o), Error) << "the executor checks the input metas";
}

TEST(FallbackExecutable, TheSecondaryRunsFromTheFirstAcceptedFailureOn) {
  auto cp = doubling();
  auto primary = std::make_shared<Scripted>(cp);
  auto secondary = std::make_shared<ProgramExecutable>(cp);
  FallbackExecutable exec(primary, secondary, internal_or_unsupported);
  EXPECT_EQ(&exec.program(), cp.get());
  ExecOptions o;
  const std::map<std::string, Tensor> in = {{"x", f32({2}, {1, 2})}};

  EXPECT_EQ(exec.run(in, o).outputs[0].first, "from") << "the primary while it works";
  EXPECT_FALSE(exec.fell_back());

  primary->error = Error(ErrorCode::kUnsupported, "no stream capture");
  ExecResult r = exec.run(in, o);
  EXPECT_EQ(r.outputs[0].first, "y") << "that very run is the secondary's";
  EXPECT_TRUE(exec.fell_back());
  EXPECT_EQ(primary->runs, 2);

  primary->error.reset();
  EXPECT_EQ(exec.run(in, o).outputs[0].first, "y") << "and every run after it";
  EXPECT_EQ(primary->runs, 2) << "the primary is not tried again";
}

TEST(FallbackExecutable, OtherErrorsAreThrownAndThePrimaryStays) {
  auto cp = doubling();
  auto primary = std::make_shared<Scripted>(cp);
  FallbackExecutable exec(primary, std::make_shared<ProgramExecutable>(cp), internal_or_unsupported);
  ExecOptions o;
  const std::map<std::string, Tensor> in = {{"x", f32({2}, {1, 2})}};
  primary->error = Error(ErrorCode::kDeadlineExceeded, "past its deadline", "n1");
  try {
    exec.run(in, o);
    FAIL() << "expected deadline_exceeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded);
    EXPECT_EQ(e.node(), "n1");
  }
  EXPECT_FALSE(exec.fell_back());
  primary->error.reset();
  EXPECT_EQ(exec.run(in, o).outputs[0].first, "from");
}

}  // namespace
}  // namespace tensord
