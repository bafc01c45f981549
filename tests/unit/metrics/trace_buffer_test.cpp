#include "metrics/trace_buffer.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace tensord {
namespace {

TraceRecord rec(const std::string& name, const std::string& tenant, int64_t ts = 0) {
  TraceRecord r;
  r.name = name;
  r.cat = "op";
  r.ts_ns = ts;
  r.dur_ns = 1500;
  r.tenant = tenant;
  return r;
}

TEST(TraceBuffer, KeepsTheNewestRecordsOldestFirst) {
  TraceBuffer tb(4);
  for (int i = 0; i < 10; ++i) tb.add(rec("r" + std::to_string(i), "a"));
  EXPECT_EQ(tb.added(), 10u);
  auto all = tb.snapshot(100, {});
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all.front().name, "r6");
  EXPECT_EQ(all.back().name, "r9");
  auto last2 = tb.snapshot(2, {});
  ASSERT_EQ(last2.size(), 2u);
  EXPECT_EQ(last2[0].name, "r8");
  EXPECT_EQ(last2[1].name, "r9");
}

TEST(TraceBuffer, LastCountsOnlyVisibleRecords) {
  TraceBuffer tb(16);
  tb.add(rec("a1", "alice"));
  tb.add(rec("b1", "bob"));
  tb.add(rec("a2", "alice"));
  tb.add(rec("b2", "bob"));
  auto mine = tb.snapshot(2, [](const TraceRecord& r) { return r.tenant == "alice"; });
  ASSERT_EQ(mine.size(), 2u);
  EXPECT_EQ(mine[0].name, "a1");
  EXPECT_EQ(mine[1].name, "a2");
}

TEST(TraceBuffer, RendersChromeTraceJson) {
  TraceBuffer tb(16);
  uint32_t lane = tb.lane("runner default");
  auto x = rec("mul \"quoted\"", "alice", 2500);
  x.tid = lane;
  x.args = "{\"node\":\"m\"}";
  tb.add(x);
  tb.add(TraceRecord{'s', "job", "flow", 1000, 0, lane, 7, "alice", {}});
  tb.add(TraceRecord{'f', "job", "flow", 3000, 0, lane, 7, "alice", {}});
  tb.add(TraceRecord{'b', "queued", "queue", 0, 2000, lane, 9, "alice", {}});
  tb.add(rec("secret", "bob"));
  std::string json = tb.render_json(100, "alice", false);
  EXPECT_EQ(json.rfind("{\"traceEvents\":[", 0), 0u);
  EXPECT_NE(json.find("\"displayTimeUnit\":\"ms\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"runner default #" + std::to_string(lane) + "\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"mul \\\"quoted\\\"\""), std::string::npos);
  EXPECT_NE(json.find("\"ph\":\"X\",\"ts\":2.500"), std::string::npos);
  EXPECT_NE(json.find("\"dur\":1.500"), std::string::npos);
  EXPECT_NE(json.find("\"ph\":\"f\",\"ts\":3.000,\"pid\":1,\"tid\":" + std::to_string(lane) + ",\"id\":7,\"bp\":\"e\""),
            std::string::npos);
  EXPECT_NE(json.find("\"ph\":\"b\""), std::string::npos);
  EXPECT_NE(json.find("\"ph\":\"e\",\"ts\":2.000"), std::string::npos);
  EXPECT_EQ(json.find("secret"), std::string::npos);
  EXPECT_NE(tb.render_json(100, "", true).find("secret"), std::string::npos);
  EXPECT_EQ(tb.render_json(100, "", false).find("mul"), std::string::npos);  // no tenant: nothing
}

TEST(TraceBuffer, LanesArePerThreadAndNamedOnce) {
  TraceBuffer tb(8);
  uint32_t a = tb.lane("first");
  EXPECT_EQ(tb.lane("ignored"), a);
  uint32_t b = 0;
  std::thread([&] { b = tb.lane("other"); }).join();
  EXPECT_NE(a, b);
}

TEST(TraceBuffer, ZeroCapacityIsDisabled) {
  TraceBuffer tb(0);
  EXPECT_FALSE(tb.enabled());
  tb.add(rec("x", "a"));
  EXPECT_TRUE(tb.snapshot(10, {}).empty());
}

TEST(TraceBuffer, ConcurrentWritersKeepTheRingConsistent) {
  TraceBuffer tb(1000);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) tb.add(rec("x", "a"));
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(tb.added(), 20000u);
  EXPECT_EQ(tb.snapshot(5000, {}).size(), 1000u);
}

TEST(JsonEscape, EscapesControlCharacters) {
  EXPECT_EQ(json_escape("a\"b\\c\n\x01"), "a\\\"b\\\\c\\n\\u0001");
}

}  // namespace
}  // namespace tensord
