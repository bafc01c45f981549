#include "api/json_parse.h"

#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "ops/error.h"

namespace tensord {
namespace {

rapidjson::Document parse(const std::string& text, int max_depth = kMaxJsonDepth) {
  rapidjson::Document d;
  parse_json(text, d, "body", max_depth);
  return d;
}

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

TEST(JsonParse, NumbersRapidJsonGetsWrong) {
  // Inputs with known bugs in RapidJSON 1.1.0's full-precision mode.
  auto d = parse(R"([0e100, 0.000000000000000000000000, 0.184467440737095516159, 2.220446049250313e-16])");
  EXPECT_EQ(d[0].GetDouble(), 0.0);
  EXPECT_EQ(d[1].GetDouble(), 0.0);
  EXPECT_EQ(d[2].GetDouble(), 0.18446744073709551);
  EXPECT_EQ(d[3].GetDouble(), std::ldexp(1.0, -52));
}

TEST(JsonParse, NumberTypesMatchRapidJson) {
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

TEST(JsonParse, DoublesRoundTripBitExact) {
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

TEST(JsonParse, RejectsBadInput) {
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

TEST(JsonParse, BoundsNesting) {
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

TEST(JsonParse, DocumentIsNullAfterFailureAndReusable) {
  rapidjson::Document d;
  parse_json("[1]", d, "b");
  EXPECT_TRUE(d.IsArray());
  EXPECT_THROW(parse_json("[1", d, "b"), Error);
  EXPECT_TRUE(d.IsNull());
  parse_json(R"({"k": "v", "k": "w"})", d, "b");
  EXPECT_EQ(d.MemberCount(), 2u);  // duplicates are kept; codecs detect them
}

}  // namespace
}  // namespace tensord
