#include "metrics/log.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <chrono>
#include <string>
#include <thread>

namespace tensord::log {
namespace {

std::string capture(Format f, Level min, Level at, std::string_view msg, std::initializer_list<Field> fields) {
  configure(f, min);
  flush();  // nothing an earlier test left held lands in this capture
  testing::internal::CaptureStderr();
  if (enabled(at)) write(at, msg, fields);
  flush();
  std::string out = testing::internal::GetCapturedStderr();
  configure(Format::kText, Level::kInfo);
  return out;
}

TEST(Log, TextLinesQuoteWhatNeedsIt) {
  std::string line =
      capture(Format::kText, Level::kInfo, Level::kInfo, "request",
              {{"route", "/v1/run"}, {"status", 200}, {"msg", "two words"}, {"empty", ""}, {"ms", 1.5}, {"ok", true}});
  EXPECT_NE(line.find(" info request route=/v1/run status=200 msg=\"two words\" empty=\"\" ms=1.5 ok=true"),
            std::string::npos)
      << line;
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per event";
}

TEST(Log, JsonLinesAreOneObjectWithTypedFields) {
  std::string line = capture(Format::kJson, Level::kDebug, Level::kWarn, "quote \" and \n newline",
                             {{"request_id", "r\"1"}, {"status", 503}, {"seconds", 0.25}});
  rapidjson::Document d;
  d.Parse(line.c_str());
  ASSERT_FALSE(d.HasParseError()) << line;
  ASSERT_TRUE(d.IsObject());
  EXPECT_STREQ(d["msg"].GetString(), "quote \" and \n newline");
  EXPECT_STREQ(d["level"].GetString(), "warning");
  EXPECT_STREQ(d["request_id"].GetString(), "r\"1");
  EXPECT_EQ(d["status"].GetInt(), 503);
  EXPECT_DOUBLE_EQ(d["seconds"].GetDouble(), 0.25);
  EXPECT_TRUE(d["ts"].IsString());
}

TEST(Log, BelowTheLevelNothingIsWritten) {
  EXPECT_EQ(capture(Format::kText, Level::kWarn, Level::kInfo, "quiet", {}), "");
  EXPECT_NE(capture(Format::kText, Level::kWarn, Level::kError, "loud", {}).find("loud"), std::string::npos);
}

TEST(Log, AWarningWritesWhatWasHeldFirstInOrder) {
  configure(Format::kText, Level::kInfo);
  flush();
  testing::internal::CaptureStderr();
  info("first held");
  warn("then a warning");
  // No flush(): the warning wrote both.
  const std::string out = testing::internal::GetCapturedStderr();
  const size_t first = out.find("first held"), then = out.find("then a warning");
  ASSERT_NE(first, std::string::npos) << out;
  ASSERT_NE(then, std::string::npos) << out;
  EXPECT_LT(first, then);
}

TEST(Log, HeldLinesAreWrittenWithinTheFlushInterval) {
  configure(Format::kText, Level::kInfo);
  flush();
  testing::internal::CaptureStderr();
  info("written by the flusher");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // 25 flush intervals
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("written by the flusher"), std::string::npos) << out;
}

TEST(Log, FlagsParse) {
  Level l{};
  Format f{};
  EXPECT_TRUE(parse_level("warn", l));
  EXPECT_EQ(l, Level::kWarn);
  EXPECT_FALSE(parse_level("WARN", l));
  EXPECT_FALSE(parse_level("", l));
  EXPECT_TRUE(parse_format("json", f));
  EXPECT_EQ(f, Format::kJson);
  EXPECT_FALSE(parse_format("yaml", f));
}

}  // namespace
}  // namespace tensord::log
