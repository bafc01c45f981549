// Programs beside a device backend (graphs/device_placement.h), on the fake
// backend with the checking kernels of fake_device_kernels.h.
#include "graphs/device_placement.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <string_view>

#include "graphs/executor.h"
#include "ops/error.h"
#include "ops/fake/fake_backend.h"
#include "ops/memory_account.h"
#include "tests/unit/graphs/fake_device_kernels.h"
#include "tests/unit/graphs/program_builder.h"

namespace tensord {
namespace {
using namespace testing_util;

struct FakeFixture {
  FakeBackend backend{1};
  std::shared_ptr<MemoryAccount> acct = std::make_shared<MemoryAccount>("t");
  ExecOptions opts() {
    ExecOptions o;
    o.ctx.backend = &backend;
    o.ctx.device = Device{DeviceType::kFake, 0};
    o.ctx.account = acct;
    return o;
  }
};

std::vector<float> host_floats(const Tensor& t) {
  Tensor h = t.to_host();
  return std::vector<float>(h.data_ptr<float>(), h.data_ptr<float>() + h.numel());
}

TEST(DevicePlacement, ValuesMoveOnlyWhereTheirKernelsRunAndOncePerDirection) {
  FakeFixture f;
  Program p;
  p.nodes.push_back(node("a", "add", {ref("x"), ref("x")}, {"y"}));  // fake: x uploaded once
  p.nodes.push_back(node("e", "exp", {ref("y")}, {"z"}));            // host: y copied out once
  p.nodes.push_back(node("m", "mul", {ref("z"), ref("y")}, {"w"}));  // fake: z uploaded, y already there
  p.nodes.push_back(node("n", "neg", {ref("y")}, {"v"}));            // host (no fake kernel): y's copy reused
  p.outputs = {"w", "v"};
  Tensor x = f32({3}, {0.f, 0.5f, 1.f});
  CompiledProgram cp = compile_program(p, {{"x", x.meta()}}, nullptr);
  const int calls = g_fake_calls.load();
  ExecResult r = execute_program(cp, {{"x", x}}, f.opts());
  EXPECT_EQ(g_fake_calls.load() - calls, 2) << "add and mul ran on the device";
  EXPECT_EQ(f.backend.copies_to_device(), 2) << "x and z, once each";
  EXPECT_EQ(f.backend.copies_to_host(), 1) << "y, once for exp and neg";
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_EQ(r.outputs[0].second.device().type, DeviceType::kFake) << "a device result stays on the device";
  EXPECT_TRUE(r.outputs[1].second.on_host());
  const std::vector<float> w = host_floats(r.outputs[0].second);
  for (int i = 0; i < 3; ++i) {
    const float y = 2 * x.data_ptr<float>()[i];
    EXPECT_FLOAT_EQ(w[static_cast<size_t>(i)], std::exp(y) * y);
    EXPECT_FLOAT_EQ(r.outputs[1].second.data_ptr<float>()[i], -y);
  }
  r = ExecResult{};
  EXPECT_EQ(f.acct->used(), 0) << "device values and host copies alike are charged and released";
  EXPECT_EQ(f.backend.allocated_bytes(Device{DeviceType::kFake, 0}), 0);
}

TEST(DevicePlacement, CallsADeviceKernelRefusesRunOnTheCpuAndNumbersStayOnTheHost) {
  FakeFixture f;
  Program p;
  p.nodes.push_back(node("i", "add", {ref("n"), lit(Attr(int64_t{1}))}, {"n1"}));  // int64: refused, host
  p.nodes.push_back(node("a", "mul", {ref("x"), lit(Attr(3.0))}, {"y"}));          // float32: device
  p.outputs = {"n1", "y"};
  Tensor x = f32({2}, {1, 2});
  Tensor n = Tensor::empty_host(DType::kInt64, {2});
  n.data_ptr<int64_t>()[0] = 5;
  n.data_ptr<int64_t>()[1] = 7;
  CompiledProgram cp = compile_program(p, {{"x", x.meta()}, {"n", n.meta()}}, nullptr);
  const int calls = g_fake_calls.load();
  ExecResult r = execute_program(cp, {{"x", x}, {"n", n}}, f.opts());
  EXPECT_EQ(g_fake_calls.load() - calls, 1) << "only the float32 mul";
  EXPECT_EQ(f.backend.copies_to_device(), 1) << "x; the number 3.0 is a launch argument";
  ASSERT_TRUE(r.outputs[0].second.on_host());
  EXPECT_EQ(r.outputs[0].second.data_ptr<int64_t>()[1], 8);
  EXPECT_EQ(r.outputs[1].second.device().type, DeviceType::kFake);
  EXPECT_EQ(host_floats(r.outputs[1].second), std::vector<float>({3, 6}));
}

// on_node hears the backend whose kernel ran each node: the device's for a
// node it takes, "cpu" for a fallback and for a control-flow node (the
// host tests it), its body's nodes each where they ran.
TEST(DevicePlacement, OnNodeNamesTheBackendThatRanEachNode) {
  FakeFixture f;
  Node c = node("c", "cond", {ref("p"), ref("y")}, {"q"});
  c.subprograms["then"] =
      sub({{"a", meta(DType::kFloat32, {3})}}, {node("bm", "mul", {ref("a"), lit(Attr(2.0))}, {"r"})}, {"r"});
  c.subprograms["else"] = sub({{"a", meta(DType::kFloat32, {3})}}, {node("bn", "neg", {ref("a")}, {"r"})}, {"r"});
  Program p;
  p.nodes.push_back(node("a", "add", {ref("x"), ref("x")}, {"y"}));                // fake
  p.nodes.push_back(node("e", "exp", {ref("y")}, {"z"}));                          // no fake kernel: cpu
  p.nodes.push_back(node("i", "add", {ref("n"), lit(Attr(int64_t{1}))}, {"n1"}));  // int64 refused: cpu
  p.nodes.push_back(node("g", "gt", {ref("n1"), lit(Attr(int64_t{0}))}, {"p"}));   // cpu
  c.args = {ref("p"), ref("y")};
  p.nodes.push_back(c);
  p.outputs = {"z", "q"};
  Tensor x = f32({3}, {1, 2, 3});
  Tensor n = Tensor::empty_host(DType::kInt64, {});
  n.data_ptr<int64_t>()[0] = 4;
  CompiledProgram cp = compile_program(p, {{"x", x.meta()}, {"n", n.meta()}}, nullptr);
  std::map<std::string, std::string> ran;
  ExecOptions o = f.opts();
  o.on_node = [&ran](const CompiledProgram&, const BoundNode& b, double, std::chrono::steady_clock::time_point,
                     std::string_view backend) { ran[b.id] = std::string(backend); };
  execute_program(cp, {{"x", x}, {"n", n}}, o);
  const std::map<std::string, std::string> want{{"a", "fake"}, {"e", "cpu"}, {"i", "cpu"},
                                                {"g", "cpu"},  {"c", "cpu"}, {"bm", "fake"}};
  EXPECT_EQ(ran, want);
}

TEST(DevicePlacement, HostOutputsAreCopiedOut) {
  FakeFixture f;
  Program p;
  p.nodes.push_back(node("a", "add", {ref("x"), lit(Attr(1.0))}, {"y"}));
  p.outputs = {"y"};
  Tensor x = f32({2}, {1, 2});
  CompiledProgram cp = compile_program(p, {{"x", x.meta()}}, nullptr);
  ExecOptions o = f.opts();
  o.host_outputs = true;
  ExecResult r = execute_program(cp, {{"x", x}}, o);
  ASSERT_TRUE(r.outputs[0].second.on_host());
  EXPECT_FLOAT_EQ(r.outputs[0].second.data_ptr<float>()[1], 3.f);
}

TEST(DevicePlacement, ACpuOptimizerReadsDeviceResidentStateThroughTheHost) {
  FakeFixture f;
  // The parameter lives on the device (a device kernel produced it).
  Tensor w = f32({2}, {1, 2}).to_device(&f.backend, Device{DeviceType::kFake, 0}, f.acct);
  ASSERT_EQ(w.device().type, DeviceType::kFake);
  StoredLookup lookup = [&](const std::string& n) { return n == "w" ? std::optional<Tensor>(w) : std::nullopt; };
  Program p;
  p.nodes.push_back(node("s", "optim.sgd", {refs({"$stored/w"}), refs({"g"})}, {}, {{"lr", lit(Attr(0.5))}}));
  Tensor g = f32({2}, {2, 4});
  CompiledProgram cp = compile_program(p, {{"g", g.meta()}}, lookup);
  ExecOptions o = f.opts();
  o.stored_read = lookup;
  ExecResult r = execute_program(cp, {{"g", g}}, o);
  ASSERT_EQ(r.stored_writes.size(), 1u);
  EXPECT_EQ(r.stored_writes[0].first, "w");
  EXPECT_EQ(host_floats(r.stored_writes[0].second), std::vector<float>({0, 0}));
  EXPECT_EQ(host_floats(w), std::vector<float>({1, 2})) << "the stored value is untouched until commit";
}

TEST(DevicePlacement, ControlFlowTestsOnTheHostWhileItsBodiesUseTheDevice) {
  FakeFixture f;
  Node c = node("c", "cond", {ref("p"), ref("x")}, {"y"});
  c.subprograms["then"] =
      sub({{"a", meta(DType::kFloat32, {3})}}, {node("m", "mul", {ref("a"), lit(Attr(2.0))}, {"r"})}, {"r"});
  c.subprograms["else"] = sub({{"a", meta(DType::kFloat32, {3})}}, {node("n", "neg", {ref("a")}, {"r"})}, {"r"});
  Program p;
  p.nodes.push_back(node("s", "add", {ref("x"), ref("x")}, {"x2"}));  // on the device
  p.nodes.push_back(node("t", "sum", {ref("x2")}, {"total"}));        // host fallback
  p.nodes.push_back(node("g", "gt", {ref("total"), lit(Attr(0.0))}, {"p"}));
  c.args = {ref("p"), ref("x2")};
  p.nodes.push_back(c);
  p.outputs = {"y"};
  Tensor x = f32({3}, {1, 2, 3});
  CompiledProgram cp = compile_program(p, {{"x", x.meta()}}, nullptr);
  const int calls = g_fake_calls.load();
  ExecResult r = execute_program(cp, {{"x", x}}, f.opts());
  EXPECT_EQ(g_fake_calls.load() - calls, 2) << "the outer add and the branch's mul";
  EXPECT_EQ(host_floats(r.outputs[0].second), std::vector<float>({4, 8, 12}));
  x = f32({3}, {-1, -2, -3});
  r = execute_program(cp, {{"x", x}}, f.opts());
  EXPECT_EQ(host_floats(r.outputs[0].second), std::vector<float>({2, 4, 6}));
  r = ExecResult{};
  EXPECT_EQ(f.acct->used(), 0);
}

TEST(DevicePlacement, TensorsMoveBetweenHostAndDeviceIntact) {
  FakeBackend b{1};
  const Device d{DeviceType::kFake, 0};
  auto acct = std::make_shared<MemoryAccount>("t", 64);
  Tensor h = f32({4}, {1, 2, 3, 4});
  EXPECT_TRUE(h.on_host());
  EXPECT_EQ(h.to_host().storage(), h.storage()) << "already there: no copy";
  Tensor dev = h.to_device(&b, d, acct);
  EXPECT_EQ(dev.device().type, DeviceType::kFake);
  EXPECT_EQ(acct->used(), 16);
  EXPECT_EQ(dev.to_device(&b, d, acct).storage(), dev.storage());
  Tensor c = dev.clone();
  EXPECT_EQ(c.device().type, DeviceType::kFake);
  EXPECT_NE(c.storage(), dev.storage());
  EXPECT_EQ(host_floats(c), std::vector<float>({1, 2, 3, 4}));
  EXPECT_EQ(acct->used(), 16) << "a clone is the caller's to charge";
  Tensor big = f32({20}, std::vector<float>(20, 1.f));
  EXPECT_THROW(big.to_device(&b, d, acct), Error) << "80 bytes over a 64-byte quota";
  EXPECT_EQ(acct->used(), 16);
}

}  // namespace
}  // namespace tensord
