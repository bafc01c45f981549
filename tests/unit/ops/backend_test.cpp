#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <thread>

#include "ops/backend.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/thread_pool.h"
#include "ops/error.h"
#include "ops/fake/fake_backend.h"
#include "ops/memory_account.h"
#include "ops/op_registry.h"
#include "ops/tensor.h"

namespace tensord {
namespace {

TEST(BackendRegistry, CpuAlwaysThere) {
  auto names = compiled_backends();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names[0], "cpu");
  auto cpu = make_backend("cpu", 2);
  ASSERT_TRUE(cpu);
  EXPECT_EQ(cpu->name(), "cpu");
  EXPECT_EQ(cpu->devices().size(), 1u);
  EXPECT_GT(cpu->devices()[0].total_memory, 0);
  EXPECT_TRUE(cpu->libraries().count("openblas"));
  EXPECT_FALSE(make_backend("nope"));
  // The fake backend is for tests, linked into them alone: no server serves it.
  EXPECT_FALSE(make_backend("fake"));
  EXPECT_EQ(std::count(names.begin(), names.end(), "fake"), 0);
}

TEST(CpuBackend, MemoryAccountingAndCopies) {
  CpuBackend b(2);
  auto acct = std::make_shared<MemoryAccount>("t", 1000);
  Device d{};
  {
    Tensor t = Tensor::empty(&b, d, DType::kFloat32, {100}, acct);
    EXPECT_EQ(acct->used(), 400);
    EXPECT_EQ(b.allocated_bytes(d), 400);
    std::vector<float> src(100, 3.f), dst(100, 0.f);
    b.copy_to_device(d, t.data(), src.data(), 400);
    b.copy_to_host(d, dst.data(), t.data(), 400);
    EXPECT_EQ(dst[99], 3.f);
    EXPECT_THROW(Tensor::empty(&b, d, DType::kFloat32, {200}, acct), Error);  // 400 + 800 > 1000
    EXPECT_EQ(acct->used(), 400);
  }
  EXPECT_EQ(acct->used(), 0);
  EXPECT_EQ(b.allocated_bytes(d), 0);
  Stream s1 = b.create_stream(d), s2 = b.create_stream(d);
  EXPECT_NE(s1.id, s2.id);
  EXPECT_FALSE(b.is_capturing(s1));
}

TEST(CpuBackend, SupportsOpFollowsRegistry) {
  CpuBackend b(1);
  EXPECT_TRUE(b.supports_op("matmul"));
  EXPECT_FALSE(b.supports_op("optim.adam_not_a_thing"));
}

TEST(FakeBackend, CapacityStreamsEventsAndSupportedOps) {
  FakeBackend f(2, 1000);
  EXPECT_EQ(f.devices().size(), 2u);
  Device d{DeviceType::kFake, 1};
  void* p = f.allocate(d, 600);
  EXPECT_THROW(f.allocate(d, 600), Error);
  f.deallocate(d, p, 600);
  EXPECT_EQ(f.allocated_bytes(d), 0);
  Stream s = f.create_stream(d);
  EXPECT_EQ(f.live_streams(), 1);
  f.record_event(s);
  f.record_event(s);
  EXPECT_EQ(f.events_recorded(), 2);
  f.destroy_stream(s);
  EXPECT_EQ(f.live_streams(), 0);
  EXPECT_FALSE(f.supports_op("add"));
  f.set_supported({"add"});
  EXPECT_TRUE(f.supports_op("add"));
}

TEST(ThreadPool, CoversRangeExactlyOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(10007);
  pool.parallel_for(10007, 100, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, ConcurrentCallersAndExceptions) {
  ThreadPool pool(3);
  std::vector<std::thread> th;
  std::atomic<int64_t> total{0};
  for (int k = 0; k < 4; ++k) {
    th.emplace_back([&] {
      for (int r = 0; r < 50; ++r) {
        pool.parallel_for(1000, 10, [&](int64_t b, int64_t e) { total += e - b; });
      }
    });
  }
  for (auto& t : th) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 1000);
  EXPECT_THROW(pool.parallel_for(1000, 1,
                                 [](int64_t b, int64_t) {
                                   if (b > 500) throw Error(ErrorCode::kInvalidArgument, "x");
                                 }),
               Error);
  // The pool still works after an exception.
  std::atomic<int64_t> n{0};
  pool.parallel_for(100, 1, [&](int64_t b, int64_t e) { n += e - b; });
  EXPECT_EQ(n.load(), 100);
}

TEST(OpRegistry, EveryOpHasSchemaInferAndCpuKernel) {
  const auto& reg = OpRegistry::global();
  auto all = reg.all();
  EXPECT_GE(all.size(), 45u);
  for (const OpDef* op : all) {
    EXPECT_TRUE(static_cast<bool>(op->infer)) << op->name;
    EXPECT_TRUE(op->kernels.count("cpu")) << op->name;
    EXPECT_FALSE(op->signature().empty());
    EXPECT_FALSE(op->dtypes.empty()) << op->name;
  }
  for (const char* name : {"add",        "sub",         "mul",       "div",         "neg",
                           "abs",        "exp",         "log",       "sqrt",        "rsqrt",
                           "pow",        "maximum",     "minimum",   "clamp",       "where",
                           "relu",       "sigmoid",     "tanh",      "eq",          "ne",
                           "lt",         "le",          "gt",        "ge",          "logical_and",
                           "logical_or", "logical_not", "to",        "copy_",       "sum",
                           "mean",       "amax",        "amin",      "argmax",      "norm",
                           "reshape",    "permute",     "transpose", "cat",         "stack",
                           "getitem",    "full",        "zeros",     "ones",        "arange",
                           "randn",      "rand",        "matmul",    "linalg.eigh", "linalg.eigvalsh"}) {
    EXPECT_TRUE(reg.find(name)) << "missing op " << name;
  }
  auto close = reg.close_names("matmull");
  ASSERT_FALSE(close.empty());
  EXPECT_EQ(close[0], "matmul");
}

}  // namespace
}  // namespace tensord

#include "ops/cpu/host_block_cache.h"

namespace tensord {
namespace {

TEST(HostBlockCache, ReusesLargeBlocksOfTheSameClass) {
  HostBlockCache c(size_t{64} << 20);
  EXPECT_EQ(HostBlockCache::size_class(100), 0u);
  EXPECT_EQ(HostBlockCache::size_class(3 << 20), size_t{4} << 20);
  void* a = c.allocate(3 << 20);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  c.deallocate(a, 3 << 20);
  EXPECT_EQ(c.cached_bytes(), size_t{4} << 20);
  void* b = c.allocate((3 << 20) + 12345);  // same 4 MiB class
  EXPECT_EQ(a, b);
  EXPECT_EQ(c.cached_bytes(), 0u);
  c.deallocate(b, (3 << 20) + 12345);
  void* small = c.allocate(1000);
  c.deallocate(small, 1000);
  EXPECT_EQ(c.cached_bytes(), size_t{4} << 20) << "small blocks are not cached";
}

TEST(HostBlockCache, CapacityBoundsWhatIsKept) {
  HostBlockCache c(size_t{6} << 20);
  void* a = c.allocate(4 << 20);
  void* b = c.allocate(4 << 20);
  c.deallocate(a, 4 << 20);
  c.deallocate(b, 4 << 20);  // over capacity: freed, not cached
  EXPECT_EQ(c.cached_bytes(), size_t{4} << 20);
  c.trim();
  EXPECT_EQ(c.cached_bytes(), 0u);
}

TEST(CpuBackend, LargeTensorsReuseCachedMemoryAndAccountExactly) {
  CpuBackend b(1);
  auto acct = std::make_shared<MemoryAccount>("t");
  void* first;
  {
    Tensor t = Tensor::empty(&b, Device{}, DType::kFloat32, {1 << 20}, acct);
    first = t.data();
    EXPECT_EQ(acct->used(), 4 << 20);
    EXPECT_EQ(b.allocated_bytes(Device{}), 4 << 20);
  }
  EXPECT_EQ(acct->used(), 0);
  EXPECT_EQ(b.allocated_bytes(Device{}), 0);
  EXPECT_GE(b.cached_bytes(), size_t{4} << 20);
  Tensor again = Tensor::empty(&b, Device{}, DType::kFloat32, {1 << 20}, acct);
  EXPECT_EQ(again.data(), first);
}

}  // namespace
}  // namespace tensord
