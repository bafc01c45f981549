#include "api/json_parse.h"
#include "metrics/utf8.h"

#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ops/error.h"

namespace tensord {
namespace {

// Every test runs on both entry points: parse_json (a view, copied) and
// parse_json_insitu (a body, parsed in place); they must agree.
bool g_insitu = false;

// In place, the document points into the text: each parse keeps its own.
std::vector<std::unique_ptr<std::string>> g_texts;

rapidjson::Document parse(const std::string& text, int max_depth = kMaxJsonDepth) {
  rapidjson::Document d;
  if (g_insitu) {
    g_texts.push_back(std::make_unique<std::string>(text));
    parse_json_insitu(*g_texts.back(), d, "body", max_depth);
  } else {
    parse_json(text, d, "body", max_depth);
  }
  return d;
}

class JsonParse : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { g_insitu = GetParam(); }
  void TearDown() override { g_texts.clear(); }
};

std::string error_of(const std::string& text, int max_depth = kMaxJsonDepth) {
  try {
    parse(text, max_depth);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
    return e.message();
  }
  ADD_FAILURE() << "accepted: " << text;
  return {};
}

uint64_t bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

TEST_P(JsonParse, NumbersRapidJsonGetsWrong) {
  // Inputs with known bugs in RapidJSON 1.1.0's full-precision mode.
  auto d = parse(R"([0e100, 0.000000000000000000000000, 0.184467440737095516159, 2.220446049250313e-16])");
  EXPECT_EQ(d[0].GetDouble(), 0.0);
  EXPECT_EQ(d[1].GetDouble(), 0.0);
  EXPECT_EQ(d[2].GetDouble(), 0.18446744073709551);
  EXPECT_EQ(d[3].GetDouble(), std::ldexp(1.0, -52));
}

TEST_P(JsonParse, NumberTypesMatchRapidJson) {
  auto d = parse(R"([123, -5, 18446744073709551615, 18446744073709551616, -9223372036854775808,
                     -9223372036854775809, 2.0, -0.0, 1e-400, 5e-324, 1E3])");
  EXPECT_TRUE(d[0].IsInt());
  EXPECT_EQ(d[0].GetInt(), 123);
  EXPECT_EQ(d[1].GetInt(), -5);
  EXPECT_TRUE(d[2].IsUint64());
  EXPECT_FALSE(d[2].IsInt64());
  EXPECT_EQ(d[2].GetUint64(), std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(d[3].IsDouble());
  EXPECT_EQ(d[3].GetDouble(), 18446744073709551616.0);
  EXPECT_TRUE(d[4].IsInt64());
  EXPECT_EQ(d[4].GetInt64(), std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(d[5].IsDouble());
  EXPECT_TRUE(d[6].IsDouble());
  EXPECT_FALSE(d[6].IsInt64());
  EXPECT_EQ(d[6].GetDouble(), 2.0);
  EXPECT_TRUE(std::signbit(d[7].GetDouble()));
  EXPECT_EQ(d[8].GetDouble(), 0.0);
  EXPECT_EQ(d[9].GetDouble(), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(d[10].GetDouble(), 1000.0);
}

TEST_P(JsonParse, DoublesRoundTripBitExact) {
  std::mt19937_64 rng(11);
  std::string text = "[";
  std::vector<double> want;
  for (int i = 0; i < 20000; ++i) {
    double v;
    do {
      uint64_t u = rng();
      std::memcpy(&v, &u, 8);
    } while (!std::isfinite(v));
    want.push_back(v);
    char buf[64];
    if (i % 2) {
      auto r = std::to_chars(buf, buf + sizeof buf, v);
      *r.ptr = '\0';
    } else {
      std::snprintf(buf, sizeof buf, "%.17g", v);
    }
    text += (i ? "," : "") + std::string(buf);
  }
  text += "]";
  auto d = parse(text);
  ASSERT_EQ(d.Size(), want.size());
  for (rapidjson::SizeType i = 0; i < want.size(); ++i) ASSERT_EQ(bits(d[i].GetDouble()), bits(want[i])) << i;
}

TEST_P(JsonParse, RejectsBadInput) {
  EXPECT_NE(error_of("[1e400]").find("too big"), std::string::npos);
  EXPECT_NE(error_of("[-1e309]").find("too big"), std::string::npos);
  EXPECT_NE(error_of("[1.8e308]").find("number too big for a double"), std::string::npos);
  EXPECT_NE(error_of(std::string("{}\0", 3)).find("NUL byte at offset 2"), std::string::npos);
  EXPECT_NE(error_of("{\"a\": 1").find("body: invalid JSON at offset"), std::string::npos);
  EXPECT_NE(error_of("").find("invalid JSON"), std::string::npos);
  EXPECT_NE(error_of("[01]").find("invalid JSON"), std::string::npos);
  EXPECT_NE(error_of("[1.]").find("invalid JSON"), std::string::npos);
  EXPECT_NE(error_of("[NaN]").find("invalid JSON"), std::string::npos);
  EXPECT_NE(error_of("\"\xc3\x28\"").find("invalid JSON"), std::string::npos);  // invalid UTF-8
  EXPECT_NE(error_of("{} {}").find("invalid JSON"), std::string::npos);
}

TEST_P(JsonParse, BoundsNesting) {
  std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(parse(ok).IsArray());
  std::string deep = std::string(65, '[') + std::string(65, ']');
  EXPECT_NE(error_of(deep).find("nested deeper than 64 levels"), std::string::npos);
  std::string mixed = "{\"a\":" + std::string(10, '[') + "{\"b\":1}" + std::string(10, ']') + "}";
  EXPECT_NE(error_of(mixed, 11).find("nested deeper than 11"), std::string::npos);
  EXPECT_TRUE(parse(mixed, 12).IsObject());
  // A million levels: no stack overflow, just an error.
  std::string huge = std::string(1'000'000, '[');
  EXPECT_NE(error_of(huge).find("nested deeper"), std::string::npos);
  EXPECT_TRUE(parse(std::string(100'000, '[') + std::string(100'000, ']'), 200'000).IsArray());
}

TEST_P(JsonParse, DocumentIsNullAfterFailureAndReusable) {
  rapidjson::Document d;
  std::string a = "[1]", b = "[1", c = R"({"k": "v", "k": "w"})";
  auto run = [&](std::string& t) { GetParam() ? parse_json_insitu(t, d, "b") : parse_json(t, d, "b"); };
  run(a);
  EXPECT_TRUE(d.IsArray());
  EXPECT_THROW(run(b), Error);
  EXPECT_TRUE(d.IsNull());
  run(c);
  EXPECT_EQ(d.MemberCount(), 2u);  // duplicates are kept; codecs detect them
}

TEST_P(JsonParse, StringsAndKeysUnescapeAndKeepTheirValues) {
  rapidjson::Document d = parse(R"({"a\"b": ["x\u00e9\n", "\ud83d\ude00", "", "plain"], "n": -0.5e1})");
  ASSERT_TRUE(d.IsObject());
  ASSERT_TRUE(d.HasMember("a\"b"));
  const auto& v = d["a\"b"];
  EXPECT_EQ(std::string(v[0].GetString(), v[0].GetStringLength()), "x\xc3\xa9\n");
  EXPECT_EQ(std::string(v[1].GetString()), "\xf0\x9f\x98\x80");
  EXPECT_EQ(v[2].GetStringLength(), 0u);
  EXPECT_STREQ(v[3].GetString(), "plain");
  EXPECT_EQ(d["n"].GetDouble(), -5.0);
  // Numbers followed at once by a delimiter, in place where no NUL ends them.
  rapidjson::Document e = parse("[1e308,2,-3,1.5]");
  EXPECT_EQ(e[0].GetDouble(), 1e308);
  EXPECT_EQ(e[2].GetInt64(), -3);
  EXPECT_NE(error_of("[1e999,2]").find("too big"), std::string::npos);
}

// Found by the json_tensor fuzzer: RapidJSON's stream skipped a lone 0xEF
// (the first byte of a byte-order mark), so "\xEF" "0" parsed as 0 by copy
// and was refused in place. Both refuse it now; both skip a whole BOM.
TEST_P(JsonParse, AByteOrderMarkIsSkippedAndALoneBomByteRefused) {
  EXPECT_NE(error_of("\xEF"
                     "0")
                .find("invalid UTF-8"),
            std::string::npos);
  EXPECT_NE(error_of("\xEF\xBB"
                     "0")
                .find("invalid UTF-8"),
            std::string::npos);
  rapidjson::Document d = parse("\xEF\xBB\xBF[1, 2]");
  ASSERT_TRUE(d.IsArray());
  EXPECT_EQ(d.Size(), 2u);
}

TEST_P(JsonParse, InvalidUtf8IsRefusedWhereverItIs) {
  for (const char* bad : {"\"\xc0\xaf\"", "\"\xe0\x80\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
                          "\"\xf8\x88\x80\x80\x80\"", "\"\x80\"", "\"abc\xe2\x82\"", "[1, \xff]"}) {
    EXPECT_NE(error_of(bad).find("invalid JSON at offset"), std::string::npos) << bad;
  }
  EXPECT_STREQ(parse("\"\xe2\x82\xac \xf0\x90\x8d\x88 \xef\xbf\xbf\"").GetString(),
               "\xe2\x82\xac \xf0\x90\x8d\x88 \xef\xbf\xbf");
}

INSTANTIATE_TEST_SUITE_P(ViewAndInsitu, JsonParse, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "insitu" : "view"; });

TEST(Utf8, ValidatesEveryByteAtEveryAlignment) {
  EXPECT_EQ(utf8_invalid_offset(""), std::string_view::npos);
  const std::string ascii(100, 'a');
  EXPECT_EQ(utf8_invalid_offset(ascii), std::string_view::npos);
  // A bad byte at each offset of a long ASCII run: found exactly there.
  for (size_t at = 0; at < 40; ++at) {
    std::string t(40, 'x');
    t[at] = static_cast<char>(0xff);
    EXPECT_EQ(utf8_invalid_offset(t), at);
    t[at] = static_cast<char>(0xc3);  // a lead byte whose continuation is missing
    EXPECT_EQ(utf8_invalid_offset(t), at);
  }
  // Multi-byte sequences straddling the 8-byte blocks.
  for (size_t pad = 0; pad < 9; ++pad) {
    std::string t = std::string(pad, 'y') + "\xf0\x9f\x98\x80\xe2\x82\xac" + std::string(9, 'z');
    EXPECT_EQ(utf8_invalid_offset(t), std::string_view::npos) << pad;
    EXPECT_EQ(utf8_invalid_offset(t.substr(0, pad + 3)), pad) << "truncated at the end";
  }
  EXPECT_EQ(utf8_invalid_offset("ab\xed\x9f\xbf"), std::string_view::npos);    // U+D7FF
  EXPECT_EQ(utf8_invalid_offset("ab\xed\xa0\x80"), 2u);                        // U+D800, a surrogate
  EXPECT_EQ(utf8_invalid_offset("\xf4\x8f\xbf\xbf"), std::string_view::npos);  // U+10FFFF
  EXPECT_EQ(utf8_invalid_offset("\xc1\xbf"), 0u);                              // overlong
}

}  // namespace
}  // namespace tensord
