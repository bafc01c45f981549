#include "api/stream_json.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <string>

#include "ops/error.h"

namespace tensord {
namespace {

std::string parse_error(const std::string& text) {
  try {
    stream_subscription_from_json(text, 1000, 100, 60000);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
    return e.message();
  }
  return "parsed";
}

TEST(StreamJson, ParsesSubscriptions) {
  StreamSubscription s = stream_subscription_from_json(R"({"subscribe": ["jobs"]})", 1000, 100, 60000);
  EXPECT_TRUE(s.jobs);
  EXPECT_FALSE(s.metrics);
  EXPECT_EQ(s.interval_ms, 1000);
  s = stream_subscription_from_json(R"({"subscribe": ["metrics", "jobs"], "interval_ms": 5})", 1000, 100, 60000);
  EXPECT_TRUE(s.metrics && s.jobs);
  EXPECT_EQ(s.interval_ms, 100);  // clamped
  EXPECT_EQ(stream_subscribed_to_json(s), R"({"type":"subscribed","streams":["metrics","jobs"],"interval_ms":100})");
}

TEST(StreamJson, NamesWhatIsWrong) {
  EXPECT_EQ(parse_error("not json").rfind("malformed JSON: ", 0), 0u);
  EXPECT_EQ(parse_error("[1, 2]"), "expected an object {\"subscribe\": [...], \"interval_ms\": N}");
  EXPECT_EQ(parse_error(R"({"interval_ms": 100})"), "missing 'subscribe'");
  EXPECT_EQ(parse_error(R"({"subscribe": []})"), "subscribe must be a non-empty array of stream names");
  EXPECT_EQ(parse_error(R"({"subscribe": ["logs"]})"), "unknown stream 'logs' (streams: metrics, jobs)");
  EXPECT_EQ(parse_error(R"({"subscribe": ["jobs"], "interval_ms": "1"})"), "interval_ms must be a number");
  EXPECT_EQ(parse_error(R"({"subscribe": ["jobs"], "x": 1})"), "unknown field 'x'");
}

TEST(StreamJson, ErrorAndJobMessages) {
  const std::string msg = "unknown stream '\"\\\n\xc3\xa9' \xff";
  rapidjson::Document d;
  const std::string json = stream_error_to_json(msg);
  d.Parse<rapidjson::kParseValidateEncodingFlag>(json.c_str(), json.size());
  ASSERT_FALSE(d.HasParseError()) << json;
  EXPECT_STREQ(d["type"].GetString(), "error");
  EXPECT_STREQ(d["error"]["code"].GetString(), "bad_request");
  EXPECT_EQ(std::string(d["error"]["message"].GetString()), "unknown stream '\"\\\n\xc3\xa9' ?");

  JobStateEvent e{"job-1", "succeeded", "alice", "default", 0.5, 2};
  EXPECT_EQ(job_event_to_json(e),
            R"({"type":"job","id":"job-1","state":"succeeded","tenant":"alice","partition":"default",)"
            R"("queue_ms":0.5,"run_ms":2.0})");
}

TEST(StreamJson, MetricsSnapshot) {
  MetricsSnapshot s;
  s.time = 1.5;
  s.uptime_s = 2;
  s.partitions.push_back({"default", 1, 2, 3, 0.25});
  s.tenants.push_back({"alice", "default", 1, 1, 0.5, 100, 1000});
  s.tenants.push_back({"bob", "default", 0, 0, 0, std::nullopt, std::nullopt});
  s.jobs_succeeded = 4;
  EXPECT_EQ(metrics_snapshot_to_json(s),
            R"({"type":"metrics","time":1.5,"uptime_s":2.0,"partitions":[{"name":"default","inflight":1,"limit":2,)"
            R"("queued":3,"busy_seconds":0.25}],"tenants":[{"name":"alice","partition":"default","queued":1,)"
            R"("running":1,"busy_seconds":0.5,"memory_bytes":100,"memory_limit_bytes":1000},{"name":"bob",)"
            R"("partition":"default","queued":0,"running":0,"busy_seconds":0.0}],"jobs":{"queued":0,"running":0,)"
            R"("succeeded":4,"failed":0,"cancelled":0}})");
  s.requests = std::map<std::string, int64_t>{{"200", 7}};
  EXPECT_NE(metrics_snapshot_to_json(s).find(R"("uptime_s":2.0,"requests":{"200":7},)"), std::string::npos);
}

}  // namespace
}  // namespace tensord
