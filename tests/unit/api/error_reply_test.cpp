#include "api/error_reply.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <string>

namespace tensord {
namespace {

// Quotes, backslashes, control characters (DEL included) and non-ASCII UTF-8.
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

std::string header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return {};
}

TEST(ErrorReply, BodyIsExactlyApiSection2) {
  HttpResponse r = error_reply(Error(ErrorCode::kShapeMismatch, "add: shapes [2] and [3]", "n3"), "e1");
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body,
            "{\"error\":{\"code\":\"shape_mismatch\",\"message\":\"add: shapes [2] and [3]\",\"node\":\"n3\","
            "\"request_id\":\"e1\"}}");
  // No node: no "node"; an empty request id is still there.
  EXPECT_EQ(error_reply(Error(ErrorCode::kNotFound, "gone"), "").body,
            "{\"error\":{\"code\":\"not_found\",\"message\":\"gone\",\"request_id\":\"\"}}");
}

TEST(ErrorReply, MessageAndNodeRoundTrip) {
  HttpResponse r = error_reply(Error(ErrorCode::kInvalidArgument, kAwkward, kAwkward), "r1");
  rapidjson::Document d = parse_strict(r.body);
  ASSERT_FALSE(d.HasParseError());
  EXPECT_EQ(str(d["error"]["message"]), kAwkward);
  EXPECT_EQ(str(d["error"]["node"]), kAwkward);
  EXPECT_EQ(str(d["error"]["code"]), "invalid_argument");
  EXPECT_EQ(str(d["error"]["request_id"]), "r1");
}

TEST(ErrorReply, InvalidUtf8IsReplacedAndLongMessagesCut) {
  rapidjson::Document d = parse_strict(error_reply(Error(ErrorCode::kBadRequest, "x\xff\xc3y"), "r").body);
  ASSERT_FALSE(d.HasParseError());
  EXPECT_EQ(str(d["error"]["message"]), "x??y");
  // A cut through a two-byte character at 2048 bytes leaves valid JSON.
  std::string longer = std::string(2047, 'a') + "\xc3\xa9" + std::string(100, 'b');
  d = parse_strict(error_reply(Error(ErrorCode::kBadRequest, longer), "r").body);
  ASSERT_FALSE(d.HasParseError());
  EXPECT_EQ(str(d["error"]["message"]), std::string(2047, 'a') + "?...");
}

TEST(ErrorReply, StatusAndHeaders) {
  EXPECT_EQ(http_status(ErrorCode::kQueueFull), 429);
  EXPECT_EQ(http_status(ErrorCode::kCancelled), 499);
  HttpResponse busy = error_reply(Error(ErrorCode::kQueueFull, "full"), "r");
  EXPECT_EQ(header(busy, "Retry-After"), "1");
  EXPECT_EQ(header(error_reply(Error(ErrorCode::kUnavailable, "draining"), "r", 7), "Retry-After"), "7");
  EXPECT_EQ(header(error_reply(Error(ErrorCode::kUnauthenticated, "who"), "r"), "WWW-Authenticate"),
            "Bearer realm=\"tensord\"");
}

TEST(ErrorReply, MethodNotAllowed) {
  HttpResponse r = method_not_allowed_reply("method PUT not allowed on /x; allowed: GET, HEAD", "GET, HEAD", "m1");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(header(r, "Allow"), "GET, HEAD");
  EXPECT_EQ(r.body,
            "{\"error\":{\"code\":\"method_not_allowed\",\"message\":\"method PUT not allowed on /x; allowed: GET, "
            "HEAD\",\"request_id\":\"m1\"}}");
}

TEST(ErrorReply, UpgradeRequired) {
  HttpResponse r = upgrade_required_reply("use a WebSocket", "websocket", "u1");
  EXPECT_EQ(r.status, 426);
  EXPECT_EQ(header(r, "Upgrade"), "websocket");
  EXPECT_EQ(r.body, "{\"error\":{\"code\":\"bad_request\",\"message\":\"use a WebSocket\",\"request_id\":\"u1\"}}");
}

TEST(ErrorReply, Fallback) {
  HttpResponse r = fallback_error_reply();
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "{\"error\":{\"code\":\"internal\",\"message\":\"internal error\"}}");
}

TEST(ErrorJson, LeavesOutWhatIsAbsent) {
  EXPECT_EQ(error_json("c", "m", "", std::nullopt), "{\"error\":{\"code\":\"c\",\"message\":\"m\"}}");
  EXPECT_EQ(error_json("c", "m", "n", "r"),
            "{\"error\":{\"code\":\"c\",\"message\":\"m\",\"node\":\"n\",\"request_id\":\"r\"}}");
}

}  // namespace
}  // namespace tensord
