#include "metrics/trace_buffer.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <atomic>
#include <memory>
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

TEST(TraceBuffer, SetEnabledFalseDropsRecords) {  // --trace off
  TraceBuffer tb(8);
  tb.add(rec("kept", "a"));
  tb.set_enabled(false);
  EXPECT_FALSE(tb.enabled());
  tb.add(rec("dropped", "a"));
  tb.set_enabled(true);
  EXPECT_TRUE(tb.enabled());
  tb.add(rec("kept too", "a"));
  auto snap = tb.snapshot(10, {});
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].name, "kept");
  EXPECT_EQ(snap[1].name, "kept too");
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

// ------------------------------------------------------------ fast records

TraceEvent ev(TraceKind kind, int64_t ts, int64_t dur, uint64_t job) {
  TraceEvent e;
  e.kind = kind;
  e.ts_ns = ts;
  e.dur_ns = dur;
  e.job = job;
  e.tid = 3;
  return e;
}

TEST(TraceBuffer, FastRecordsRenderTheirFullForm) {
  uint32_t tenant = 0, partition = 0, state = 0, name = 0;
  ASSERT_TRUE(TraceBuffer::intern("al\"ice", tenant));
  ASSERT_TRUE(TraceBuffer::intern("interactive", partition));
  ASSERT_TRUE(TraceBuffer::intern("succeeded", state));
  ASSERT_TRUE(TraceBuffer::intern("POST /v1/run", name));
  uint32_t again = 0;
  ASSERT_TRUE(TraceBuffer::intern("interactive", again));
  EXPECT_EQ(again, partition);
  EXPECT_EQ(TraceBuffer::interned(partition), "interactive");

  TraceTable t;
  t.graph = "g-7";
  t.nodes.push_back({"mul", "n\"1", "mul", {"float32[2, 3]", "float32[]"}, {"float32[2, 3]"}});
  TraceEvent op = ev(TraceKind::kOp, 2000, 500, 12);
  op.tenant = tenant;
  op.index = 0;
  TraceRecord r = TraceBuffer::to_record(op, &t);
  EXPECT_EQ(r.ph, 'X');
  EXPECT_EQ(r.name, "mul");
  EXPECT_EQ(r.cat, "op");
  EXPECT_EQ(r.tenant, "al\"ice");
  EXPECT_EQ(r.tid, 3u);
  EXPECT_EQ(r.ts_ns, 2000);
  EXPECT_EQ(r.dur_ns, 500);
  EXPECT_EQ(r.args,
            "{\"node\":\"n\\\"1\",\"op\":\"mul\",\"job\":\"job-12\",\"graph\":\"g-7\",\"inputs\":[\"float32[2, 3]\","
            "\"float32[]\"],\"outputs\":[\"float32[2, 3]\"]}");

  TraceEvent run = ev(TraceKind::kRun, 1000, 4000, 12);
  run.tenant = tenant;
  run.partition = partition;
  run.name = state;
  EXPECT_EQ(TraceBuffer::to_record(run, &t).args,
            "{\"job\":\"job-12\",\"tenant\":\"al\\\"ice\",\"partition\":\"interactive\",\"state\":\"succeeded\","
            "\"graph\":\"g-7\"}");
  EXPECT_EQ(TraceBuffer::to_record(run, nullptr).name, "run job-12");

  TraceEvent q = ev(TraceKind::kQueued, 0, 1000, 12);
  q.partition = partition;
  r = TraceBuffer::to_record(q, nullptr);
  EXPECT_EQ(r.ph, 'b');
  EXPECT_EQ(r.name, "queued job-12");
  EXPECT_EQ(r.cat, "queue");
  EXPECT_EQ(r.id, 12u);
  EXPECT_EQ(r.args, "{\"job\":\"job-12\",\"tenant\":\"\",\"partition\":\"interactive\"}");

  TraceEvent fs = ev(TraceKind::kFlowStart, 5, 0, 12);
  EXPECT_EQ(TraceBuffer::to_record(fs, nullptr).id, 24u);
  EXPECT_EQ(TraceBuffer::to_record(fs, nullptr).name, "job");
  fs.kind = TraceKind::kFlowEnd;
  fs.flags = TraceEvent::kOpsFlow;
  r = TraceBuffer::to_record(fs, nullptr);
  EXPECT_EQ(r.ph, 'f');
  EXPECT_EQ(r.name, "ops");
  EXPECT_EQ(r.cat, "flow");
  EXPECT_EQ(r.id, 25u);

  TraceEvent req = ev(TraceKind::kRequest, 0, 9000, 12);
  req.name = name;
  req.flags = TraceEvent::kHasJob;
  req.data = 0x00ab'cdef'0123'4567ull;
  r = TraceBuffer::to_record(req, nullptr);
  EXPECT_EQ(r.name, "POST /v1/run");
  EXPECT_EQ(r.cat, "request");
  EXPECT_EQ(r.args, "{\"request_id\":\"00abcdef01234567\",\"jobs\":\"job-12\"}");
  TraceBuffer::Strings odd;
  odd.request_id = "client \"id\"";
  odd.jobs = "job-1,x-2";
  EXPECT_EQ(TraceBuffer::to_record(req, nullptr, odd).args,
            "{\"request_id\":\"client \\\"id\\\"\",\"jobs\":\"job-1,x-2\"}");
  TraceBuffer::Strings named;
  named.job_id = "weird";
  EXPECT_EQ(TraceBuffer::to_record(q, nullptr, named).name, "queued weird");

  uint64_t n = 0;
  EXPECT_TRUE(trace_job_number("job-0", n));
  EXPECT_EQ(n, 0u);
  EXPECT_TRUE(trace_job_number("job-18446744073709551615", n));
  EXPECT_EQ(n, UINT64_MAX);
  EXPECT_FALSE(trace_job_number("job-18446744073709551616", n));
  EXPECT_FALSE(trace_job_number("job-007", n));
  EXPECT_FALSE(trace_job_number("job-", n));
  EXPECT_FALSE(trace_job_number("job-1a", n));
  EXPECT_FALSE(trace_job_number("jab-1", n));
}

TEST(TraceBuffer, FastAndWholeRecordsShareTheRingInOrder) {
  TraceBuffer tb(8);
  auto t = std::make_shared<TraceTable>();
  t->nodes.push_back({"add", "a", "add", {"float32[4]"}, {"float32[4]"}});
  tb.retain(t);
  TraceEvent op = ev(TraceKind::kOp, 10, 1, 5);
  op.data = t->serial;
  t->touch(tb.add(op));
  tb.add(rec("whole", ""));
  TraceEvent missing = op;
  missing.data = t->serial + 1000;  // data never registered: dropped, not rendered wrong
  tb.add(missing);
  auto snap = tb.snapshot(10, {});
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].name, "add");
  EXPECT_EQ(snap[0].args.find("\"node\":\"a\""), 1u);
  EXPECT_EQ(snap[1].name, "whole");
  EXPECT_EQ(tb.added(), 3u);
}

TEST(TraceBuffer, RingAndItsDataStayBounded) {
  constexpr size_t kCap = 64;
  TraceBuffer tb(kCap);
  uint64_t n = 0;
  for (int i = 0; i < 20000; ++i) {
    if (i % 10 == 0) {  // a program's table per ten records, as the engine makes them
      auto t = std::make_shared<TraceTable>();
      t->nodes.push_back({"neg", "x" + std::to_string(i), "neg", {}, {}});
      tb.retain(t);
      TraceEvent op = ev(TraceKind::kOp, i, 1, static_cast<uint64_t>(i));
      op.data = t->serial;
      t->touch(tb.add(op));
    } else if (i % 10 == 1) {
      tb.add(rec("whole " + std::to_string(i), "a", i));
    } else {
      tb.add(ev(TraceKind::kQueued, i, 1, static_cast<uint64_t>(i)));
    }
    ++n;
    ASSERT_LE(tb.retained(), 2 * kCap + 256) << "at record " << i;
  }
  EXPECT_EQ(tb.added(), n);
  auto all = tb.snapshot(100000, {});
  ASSERT_EQ(all.size(), kCap);
  // The newest kCap records, oldest first, each with its data.
  for (size_t k = 0; k < kCap; ++k) {
    const int i = static_cast<int>(n - kCap + k);
    const TraceRecord& r = all[k];
    if (i % 10 == 0) {
      EXPECT_EQ(r.args.find("\"node\":\"x" + std::to_string(i) + "\""), 1u) << r.args;
    } else if (i % 10 == 1) {
      EXPECT_EQ(r.name, "whole " + std::to_string(i));
    } else {
      EXPECT_EQ(r.name, "queued job-" + std::to_string(i));
    }
  }
}

// Records written from several threads while another reads: every record
// read is whole (its fields agree with each other), none is lost once the
// writers are done, and the ring holds exactly its capacity.
TEST(TraceBuffer, ConcurrentFastAndWholeRecordsComeOutWellFormed) {
  constexpr size_t kCap = 512;
  constexpr int kThreads = 4, kPerThread = 20000;
  TraceBuffer tb(kCap);
  std::vector<uint32_t> tenants(kThreads);
  for (int t = 0; t < kThreads; ++t) ASSERT_TRUE(TraceBuffer::intern("tenant-" + std::to_string(t), tenants[t]));
  auto check = [&](const TraceRecord& r) {
    if (r.cat == "queue") {  // fast: job N = t * 1e6 + i, ts N, dur 3N
      ASSERT_EQ(r.ph, 'b');
      const uint64_t n = r.id;
      const int t = static_cast<int>(n / 1000000);
      ASSERT_LT(t, kThreads);
      EXPECT_EQ(r.name, "queued job-" + std::to_string(n));
      EXPECT_EQ(r.ts_ns, static_cast<int64_t>(n));
      EXPECT_EQ(r.dur_ns, static_cast<int64_t>(3 * n));
      EXPECT_EQ(r.tid, static_cast<uint32_t>(t + 1));
      EXPECT_EQ(r.tenant, "tenant-" + std::to_string(t));
      EXPECT_EQ(r.args, "{\"job\":\"job-" + std::to_string(n) + "\",\"tenant\":\"tenant-" + std::to_string(t) +
                            "\",\"partition\":\"\"}");
    } else {  // whole: name w<i>, ts i, args {"i":i}
      ASSERT_EQ(r.cat, "whole");
      EXPECT_EQ(r.name, "w" + std::to_string(r.ts_ns));
      EXPECT_EQ(r.args, "{\"i\":" + std::to_string(r.ts_ns) + "}");
      EXPECT_EQ(r.tenant, "whole");
    }
  };
  std::atomic<int> writing{kThreads};
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kPerThread; ++i) {
        if (t == 0 && i % 4 == 0) {
          TraceRecord w;
          w.name = "w" + std::to_string(i);
          w.cat = "whole";
          w.ts_ns = i;
          w.tenant = "whole";
          w.args = "{\"i\":" + std::to_string(i) + "}";
          tb.add(std::move(w));
          continue;
        }
        const uint64_t n = static_cast<uint64_t>(t) * 1000000 + static_cast<uint64_t>(i);
        TraceEvent e = ev(TraceKind::kQueued, static_cast<int64_t>(n), static_cast<int64_t>(3 * n), n);
        e.tid = static_cast<uint32_t>(t + 1);
        e.tenant = tenants[t];
        tb.add(e);
      }
      writing.fetch_sub(1);
    });
  }
  size_t reads = 0, seen = 0;
  std::thread reader([&] {
    go.store(true);
    do {
      auto snap = tb.snapshot(kCap, {});
      ASSERT_LE(snap.size(), kCap);
      for (const auto& r : snap) check(r);
      ++reads;
      seen += snap.size();
    } while (writing.load() > 0);
  });
  for (auto& t : ts) t.join();
  reader.join();
  EXPECT_GT(reads, 0u);
  EXPECT_EQ(tb.added(), static_cast<uint64_t>(kThreads) * kPerThread);
  auto all = tb.snapshot(100000, {});
  EXPECT_EQ(all.size(), kCap);  // all writers done: every slot holds a whole record
  for (const auto& r : all) check(r);
  EXPECT_LE(tb.retained(), 2 * kCap + 256);
}

// Quotes, backslashes, control characters (DEL included) and non-ASCII
// UTF-8: what a user may put in a node id or a graph name.
const std::string kAwkward = "q\"b\\s/n\nt\tc\x01\x1f\x7f h\xc3\xa9 \xe2\x9c\x93 \xf0\x9d\x84\x9e";

rapidjson::Document parse_strict(const std::string& json) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseValidateEncodingFlag>(json.c_str(), json.size());
  EXPECT_FALSE(d.HasParseError()) << rapidjson::GetParseError_En(d.GetParseError()) << " at " << d.GetErrorOffset()
                                  << ": " << json;
  return d;
}

std::string str(const rapidjson::Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

TEST(TraceBuffer, NamesRoundTripThroughTheJson) {
  TraceBuffer tb(16);
  uint32_t lane = tb.lane(kAwkward);
  auto x = rec(kAwkward, "alice", 2500);
  x.cat = kAwkward;
  x.tid = lane;
  tb.add(x);
  rapidjson::Document d = parse_strict(tb.render_json(100, "alice", false));
  ASSERT_FALSE(d.HasParseError());
  const auto& evs = d["traceEvents"].GetArray();
  bool lane_seen = false, span_seen = false;
  for (const auto& e : evs) {
    if (str(e["name"]) == "thread_name" && e["tid"].GetUint() == lane) {
      EXPECT_EQ(str(e["args"]["name"]), kAwkward + " #" + std::to_string(lane));
      lane_seen = true;
    }
    if (str(e["ph"]) == "X") {
      EXPECT_EQ(str(e["name"]), kAwkward);
      EXPECT_EQ(str(e["cat"]), kAwkward);
      span_seen = true;
    }
  }
  EXPECT_TRUE(lane_seen);
  EXPECT_TRUE(span_seen);
}

TEST(TraceBuffer, OpArgsRoundTripThroughTheJson) {
  auto t = std::make_shared<TraceTable>();
  t->graph = kAwkward;
  t->nodes.push_back({"add", kAwkward, "add", {"float32[2]"}, {kAwkward}});
  TraceEvent op;
  op.kind = TraceKind::kOp;
  op.job = 3;
  op.index = 0;
  TraceRecord r = TraceBuffer::to_record(op, t.get());
  rapidjson::Document a = parse_strict(r.args);
  ASSERT_FALSE(a.HasParseError());
  EXPECT_EQ(str(a["node"]), kAwkward);
  EXPECT_EQ(str(a["graph"]), kAwkward);
  EXPECT_EQ(str(a["job"]), "job-3");
  EXPECT_EQ(str(a["outputs"][0]), kAwkward);

  TraceEvent req;
  req.kind = TraceKind::kRequest;
  TraceRecord q = TraceBuffer::to_record(req, nullptr, TraceBuffer::Strings{{}, kAwkward, kAwkward, {}, {}});
  rapidjson::Document qa = parse_strict(q.args);
  ASSERT_FALSE(qa.HasParseError());
  EXPECT_EQ(str(qa["request_id"]), kAwkward);
  EXPECT_EQ(str(qa["jobs"]), kAwkward);
}

TEST(TraceBuffer, InvalidUtf8BecomesQuestionMarks) {
  TraceBuffer tb(4);
  auto x = rec("bad \xff\xc3 end", "alice");
  tb.add(x);
  rapidjson::Document d = parse_strict(tb.render_json(100, "alice", false));
  ASSERT_FALSE(d.HasParseError());
  bool seen = false;
  for (const auto& e : d["traceEvents"].GetArray()) {
    if (str(e["ph"]) == "X") {
      EXPECT_EQ(str(e["name"]), "bad ?? end");
      seen = true;
    }
  }
  EXPECT_TRUE(seen);
}

}  // namespace
}  // namespace tensord
