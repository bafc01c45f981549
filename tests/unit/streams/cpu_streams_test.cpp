// The CPU backend's streams, events and capture, and the stream pool.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "ops/cpu/cpu_backend.h"
#include "ops/error.h"
#include "ops/fake/fake_backend.h"
#include "streams/stream_pool.h"

namespace tensord {
namespace {

TEST(CpuStreams, HostFuncsEventsAndSynchronize) {
  CpuBackend b(1);
  Device d{};
  Stream s1 = b.create_stream(d), s2 = b.create_stream(d);
  int x = 0;
  b.launch_host_func(s1, [&] { x = 1; });
  Event e = b.record_event(s1);
  EXPECT_EQ(e.id, s1.id);
  EXPECT_EQ(e.position, 1);
  b.wait_event(s2, e);
  int seen = -1;
  b.launch_host_func(s2, [&] { seen = x; });
  b.synchronize(s2);
  EXPECT_EQ(seen, 1);
  b.synchronize(Stream{d, 0});  // the default stream exists
  b.destroy_stream(s1);
  EXPECT_THROW(b.synchronize(s1), Error);  // not_found after destroy
  b.destroy_stream(s2);
}

TEST(CpuStreams, CaptureAndLaunchGraph) {
  CpuBackend b(1);
  Stream s = b.create_stream(Device{});
  std::atomic<int> v{0};
  EXPECT_FALSE(b.is_capturing(s));
  b.begin_capture(s);
  EXPECT_TRUE(b.is_capturing(s));
  b.launch_host_func(s, [&] { v = v * 2 + 1; });
  b.launch_host_func(s, [&] { v = v * 2; });
  EXPECT_EQ(v.load(), 0);  // recorded, not run
  auto g = b.end_capture(s);
  EXPECT_FALSE(b.is_capturing(s));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->nodes(), 2u);
  b.launch_graph(s, *g);
  b.launch_graph(s, *g);
  b.synchronize(s);
  EXPECT_EQ(v.load(), 10);  // first launch: (0*2+1)*2 = 2; second: (2*2+1)*2 = 10
}

TEST(CpuStreams, FakeBackendDoesNotSupportCapture) {
  FakeBackend f;
  Stream s = f.create_stream(Device{DeviceType::kFake, 0});
  try {
    f.begin_capture(s);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  }
  f.destroy_stream(s);
}

TEST(StreamPool, RoundRobinAndDestroysItsStreams) {
  FakeBackend f;
  {
    StreamPool pool(f, Device{DeviceType::kFake, 0}, 3);
    EXPECT_EQ(f.live_streams(), 3);
    Stream a = pool.acquire(), b2 = pool.acquire(), c = pool.acquire(), a2 = pool.acquire();
    EXPECT_EQ(a, a2);
    EXPECT_FALSE(a == b2);
    EXPECT_FALSE(b2 == c);
    EXPECT_EQ(pool.index_of(c), 2);
    EXPECT_EQ(pool.index_of(Stream{Device{DeviceType::kFake, 0}, 999}), -1);
  }
  EXPECT_EQ(f.live_streams(), 0);
  EXPECT_THROW(StreamPool(f, Device{DeviceType::kFake, 0}, 0), Error);
}

}  // namespace
}  // namespace tensord
