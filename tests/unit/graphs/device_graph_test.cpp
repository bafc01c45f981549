// Which programs a device captures whole (graphs/device_graph.h), and a
// replay plan's fallback when the device cannot capture, on the fake backend
// (fake_device_kernels.h: capture-safe float32 add, mul, lt). The capture
// itself needs a CUDA device: tests/unit/cuda/graph_test.cpp.
#include "graphs/device_graph.h"

#include <gtest/gtest.h>

#include "graphs/graph_store.h"
#include "graphs/replay_plan.h"
#include "ops/error.h"
#include "ops/fake/fake_backend.h"
#include "ops/memory_account.h"
#include "tests/unit/graphs/fake_device_kernels.h"
#include "tests/unit/graphs/device_programs.h"
#include "tests/unit/graphs/program_builder.h"

namespace tensord {
namespace {
using namespace testing_util;

CompiledProgram compile(const Program& p, std::map<std::string, TensorMeta> in) {
  return compile_program(p, in, nullptr);
}

TEST(DeviceGraph, CapturableWhenEveryNodeIsACaptureSafeDeviceKernel) {
  Program chain;
  chain.nodes.push_back(node("a", "add", {ref("x"), ref("x")}, {"y"}));
  chain.nodes.push_back(node("m", "mul", {ref("y"), lit(Attr(0.5))}, {"z"}));
  chain.outputs = {"z"};
  EXPECT_TRUE(DeviceGraph::capturable(compile(chain, {{"x", kVec}}), "fake"));
  EXPECT_FALSE(DeviceGraph::capturable(compile(chain, {{"x", kVec}}), "cpu")) << "no capture-safe cpu kernels";
  EXPECT_FALSE(DeviceGraph::capturable(compile(chain, {{"x", meta(DType::kInt64, {3})}}), "fake"))
      << "the kernel refuses int64";

  Program fallback = chain;
  fallback.nodes.push_back(node("e", "exp", {ref("z")}, {"ez"}));  // no fake kernel: a CPU node
  EXPECT_FALSE(DeviceGraph::capturable(compile(fallback, {{"x", kVec}}), "fake"));
}

TEST(DeviceGraph, CondAndWhileLoopCaptureWhenTheirBodiesDo) {
  Program c;
  c.nodes.push_back(float_cond());
  c.outputs = {"y"};
  EXPECT_TRUE(DeviceGraph::capturable(compile(c, {{"p", meta(DType::kBool, {})}, {"x", kVec}}), "fake"));

  Program w;
  w.nodes.push_back(float_while());
  w.outputs = {"s2", "x2"};
  EXPECT_TRUE(DeviceGraph::capturable(compile(w, {{"s", kOne}, {"x", kVec}, {"limit", kOne}}), "fake"));

  // A cond nested in the while body, nested again: still one graph.
  Node outer = float_while();
  std::vector<ProgramInput> in = {{"s", kOne}, {"x", kVec}, {"limit", kOne}};
  Node inner = float_cond();
  inner.args = {ref("p"), ref("x")};
  outer.subprograms["body"] = sub(
      in,
      {node("a", "add", {ref("s"), lit(Attr(1.0))}, {"t"}), node("p", "lt", {ref("s"), lit(Attr(2.0))}, {"p"}), inner},
      {"t", "y", "limit"});
  Program nested;
  nested.nodes.push_back(outer);
  nested.outputs = {"x2"};
  EXPECT_TRUE(DeviceGraph::capturable(compile(nested, {{"s", kOne}, {"x", kVec}, {"limit", kOne}}), "fake"));

  Program zero;
  zero.nodes.push_back(float_while(0));
  zero.outputs = {"x2"};
  EXPECT_FALSE(DeviceGraph::capturable(compile(zero, {{"s", kOne}, {"x", kVec}, {"limit", kOne}}), "fake"))
      << "max_iters=0 fails before the first trip: the executor's path";

  Node sc = node("s", "scan", {ref("init"), ref("xs")}, {"c", "ys"});
  sc.subprograms["body"] =
      sub({{"c", kOne}, {"x", kOne}},
          {node("a", "add", {ref("c"), ref("x")}, {"n"}), node("m", "mul", {ref("n"), ref("x")}, {"y"})}, {"n", "y"});
  Program scan;
  scan.nodes.push_back(sc);
  scan.outputs = {"c"};
  EXPECT_FALSE(DeviceGraph::capturable(compile(scan, {{"init", kOne}, {"xs", meta(DType::kFloat32, {4})}}), "fake"))
      << "scan runs on the executor's path";
}

TEST(DeviceGraph, AReplayPlanHoldsItsBuffersAndFallsBackWhenTheDeviceCannotCapture) {
  FakeBackend backend{1};
  const Device dev{DeviceType::kFake, 0};
  auto acct = std::make_shared<MemoryAccount>("t");
  Program w;
  w.nodes.push_back(float_while());
  w.outputs = {"s2", "x2"};
  auto cp = std::make_shared<const CompiledProgram>(compile(w, {{"s", kOne}, {"x", kVec}, {"limit", kOne}}));
  std::map<std::string, Tensor> host_inputs;
  for (const auto& [name, id] : cp->inputs) {
    const TensorMeta& m = cp->values[static_cast<size_t>(id)].meta;
    host_inputs.emplace(name, Tensor::empty_host(m.dtype, m.shape));
  }
  GraphPool pool(nullptr, dev, acct);
  {
    ReplayPlan plan(cp, host_inputs, pool, &backend, dev);
    ASSERT_NE(plan.device_graph(), nullptr);
    EXPECT_GT(plan.device_graph()->bytes(), 0);
    EXPECT_EQ(acct->used(), plan.device_graph()->bytes()) << "its device buffers are the tenant's";

    ExecOptions o;
    o.ctx.backend = &backend;
    o.ctx.device = dev;
    o.ctx.account = acct;
    Tensor s = f32({}, {0});
    Tensor x = f32({3}, {1, 2, 3});
    Tensor limit = f32({}, {3});
    // The fake backend has no stream capture: the plan runs the executor.
    ExecResult r = plan.run({{"s", s}, {"x", x}, {"limit", limit}}, o);
    EXPECT_FALSE(plan.device_graph()->captured());
    EXPECT_FLOAT_EQ(r.outputs[0].second.to_host().data_ptr<float>()[0], 3.f);
    EXPECT_FLOAT_EQ(r.outputs[1].second.to_host().data_ptr<float>()[2], 24.f);
    r = plan.run({{"s", s}, {"x", x}, {"limit", f32({}, {1})}}, o);
    EXPECT_FLOAT_EQ(r.outputs[1].second.to_host().data_ptr<float>()[0], 2.f);
  }
  EXPECT_EQ(acct->used(), 0) << "deleting the plan frees its device buffers";
}

}  // namespace
}  // namespace tensord
