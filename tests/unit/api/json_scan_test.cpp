// top_level_value and json_string_end (api/json_scan.h): a key of the
// top-level object found by scanning only the text before it.
#include "api/json_scan.h"

#include <gtest/gtest.h>

#include <string>

namespace tensord {
namespace {

TEST(JsonScan, FindsTheTopLevelKeysValue) {
  EXPECT_EQ(top_level_value(R"({"data": [1]})", "data"), 9u);
  EXPECT_EQ(top_level_value(" \n{\t\"k\"\r:  3}", "k"), 11u);
  // Not a key that reads the same inside a nested value or as a value.
  EXPECT_EQ(top_level_value(R"({"x": {"k": 1}, "k": 2})", "k"), 21u);
  EXPECT_EQ(top_level_value(R"({"x": ["k", {"k": 1}], "k": 2})", "k"), 28u);
  EXPECT_EQ(top_level_value(R"({"x": "k", "k": 2})", "k"), 16u);
  // The first of a key given twice (the parser then rejects the text).
  EXPECT_EQ(top_level_value(R"({"k": 1, "k": 2})", "k"), 6u);
}

TEST(JsonScan, SkipsStringsWithEscapedQuotesAndBrackets) {
  EXPECT_EQ(top_level_value(R"({"x": "\"k\": {[", "k": 2})", "k"), 24u);
  EXPECT_EQ(top_level_value(R"({"x": "a\\", "k": 2})", "k"), 18u);     // an escaped backslash ends the run
  EXPECT_EQ(top_level_value(R"({"x": "a\\\"}", "k": 2})", "k"), 21u);  // then an escaped quote
  EXPECT_EQ(top_level_value(R"({"\"k": 1, "k": 2})", "k"), 16u);       // a key holding an escape
}

TEST(JsonScan, SaysWhenTheTextEndsTooSoonOrHasNoSuchKey) {
  for (const std::string s :
       {"", "  ", "{", R"({"k)", R"({"k")", R"({"k" )", R"({"k":)", R"({"k": )", R"({"x": "a)", R"({"x": {"k": 1)"}) {
    EXPECT_EQ(top_level_value(s, "k"), kJsonMore) << s;
  }
  for (const std::string s : {"[", R"(["k", 1])", "1", R"({"x": 1})", R"({"x": {"k": 1}} , "k": 2)", "{}"}) {
    EXPECT_EQ(top_level_value(s, "k"), kJsonAbsent) << s;
  }
}

TEST(JsonScan, StringEnd) {
  const std::string s = R"(ab\"c\\"de")";
  EXPECT_EQ(json_string_end(s, 0), 7u);
  EXPECT_EQ(json_string_end(s, 8), 10u);
  EXPECT_EQ(json_string_end("abc", 0), 3u);
  EXPECT_EQ(json_string_end(R"(a\")", 0), 3u);  // only an escaped quote: no end
}

}  // namespace
}  // namespace tensord
