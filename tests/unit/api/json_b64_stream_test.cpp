// JsonB64Stream (api/json_b64_stream.h): a JSON body's top-level
// "b64" value decoded while the body arrives, in pieces of any size; and
// whatever is not a plain base64 value given back as the exact text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api/base64.h"
#include "api/json_b64_stream.h"
#include "api/json_tensor.h"
#include "ops/error.h"

namespace tensord {
namespace {

// Feeds `body` in pieces of the sizes `piece(i)` returns (at least 1).
template <class Piece>
JsonB64Stream feed(const std::string& body, Piece piece) {
  JsonB64Stream s(body.size(), std::string());
  size_t at = 0;
  for (size_t i = 0; at < body.size(); ++i) {
    EXPECT_GT(s.room(), 0u);
    const size_t n = std::min({static_cast<size_t>(piece(i)), s.room(), body.size() - at});
    std::memcpy(s.next(), body.data() + at, n);
    s.commit(n);
    at += n;
  }
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.room(), 0u);
  return s;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::string tensor_body(const std::vector<uint8_t>& bytes, const std::string& before = "") {
  return "{" + before + "\"dtype\": \"uint8\", \"shape\": [" + std::to_string(bytes.size()) + "], \"b64\" : \"" +
         base64_encode(bytes.data(), bytes.size()) + "\"}";
}

void expect_decoded(JsonB64Stream& s, const std::vector<uint8_t>& bytes, const std::string& skeleton) {
  ASSERT_TRUE(s.decoded());
  EXPECT_EQ(s.out_size(), bytes.size());
  const size_t at = s.out_offset();
  std::string out = s.take_out();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(out.data() + at) % 64, 0u);
  ASSERT_GE(out.size(), at + bytes.size());
  if (!bytes.empty()) {
    EXPECT_EQ(std::memcmp(out.data() + at, bytes.data(), bytes.size()), 0);
  }
  EXPECT_EQ(s.take_json(), skeleton);
}

TEST(JsonB64Stream, DecodesInPiecesOfEverySize) {
  for (size_t n : {0, 1, 2, 3, 4, 5, 47, 48, 100}) {
    auto bytes = random_bytes(n, static_cast<uint32_t>(n));
    const std::string body = tensor_body(bytes);
    const std::string skeleton = "{\"dtype\": \"uint8\", \"shape\": [" + std::to_string(n) + "], \"b64\" : \"\"}";
    for (size_t piece = 1; piece <= body.size(); ++piece) {
      auto s = feed(body, [&](size_t) { return piece; });
      expect_decoded(s, bytes, skeleton);
      if (HasFailure()) FAIL() << "n " << n << ", pieces of " << piece;
    }
  }
}

TEST(JsonB64Stream, DecodesALargeValueThroughItsWindow) {
  // Larger than the window several times, in random pieces, the value
  // starting at every offset mod 4.
  std::mt19937 rng(7);
  for (size_t pad = 0; pad < 4; ++pad) {
    auto bytes = random_bytes(3 * JsonB64Stream::kWindowBytes + 1 + pad, static_cast<uint32_t>(pad));
    const std::string before = "\"name\": \"" + std::string(pad, 'x') + "\", ";
    const std::string body = tensor_body(bytes, before);
    auto s = feed(body, [&](size_t) { return 1 + rng() % (200 << 10); });
    expect_decoded(
        s, bytes,
        "{" + before + "\"dtype\": \"uint8\", \"shape\": [" + std::to_string(bytes.size()) + "], \"b64\" : \"\"}");
  }
}

TEST(JsonB64Stream, FindsTheValueOnlyAsTheTopLevelKey) {
  EXPECT_EQ(JsonB64Stream::value_start("{\"b64\":\"AAAA\"}"), 8u);
  EXPECT_EQ(JsonB64Stream::value_start(" \n{ \"b64\" :\t\"A"), 13u);
  EXPECT_EQ(JsonB64Stream::value_start("{\"x\": \"b64\", \"b64\": \""), 21u);
  EXPECT_EQ(JsonB64Stream::value_start("{\"x\": \"\\\"b64\", \"b64\": \""), 23u);
  EXPECT_EQ(JsonB64Stream::value_start(""), JsonB64Stream::kMore);
  EXPECT_EQ(JsonB64Stream::value_start("{\"b6"), JsonB64Stream::kMore);
  EXPECT_EQ(JsonB64Stream::value_start("{\"b64\" "), JsonB64Stream::kMore);
  EXPECT_EQ(JsonB64Stream::value_start("{\"b64\": "), JsonB64Stream::kMore);
  EXPECT_EQ(JsonB64Stream::value_start("{\"x\": {\"b64\": \"A"), JsonB64Stream::kMore);
  EXPECT_EQ(JsonB64Stream::value_start("[\"b64\", \"A"), JsonB64Stream::kNever);
  EXPECT_EQ(JsonB64Stream::value_start("{\"b64\": [1]"), JsonB64Stream::kNever);
  EXPECT_EQ(JsonB64Stream::value_start("{\"b64\": null"), JsonB64Stream::kNever);
  EXPECT_EQ(JsonB64Stream::value_start("{\"x\": 1} {\"b64\": \"A"), JsonB64Stream::kNever);
}

TEST(JsonB64Stream, AnythingElseComesBackAsTheWholeText) {
  const std::string good = base64_encode(std::string(3000, 'q'));
  const std::vector<std::string> bodies = {
      "{\"dtype\": \"uint8\", \"shape\": [3], \"data\": [1, 2, 3]}",  // no b64
      "{\"b64\": \"" + good.substr(0, 100) + "\\/" + good + "\"}",    // an escape
      "{\"b64\": \"" + good.substr(0, 1000) + "!" + good + "\"}",     // a bad character
      "{\"b64\": \"" + good.substr(0, 1000) + "AA==" + good + "\"}",  // padding inside
      "{\"b64\": \"AQI=DBA=\"}",                                      // padding inside, in pieces (found by the fuzzer)
      "{\"b64\": \"" + good.substr(0, 1001) + "\"}",                  // a length not a multiple of 4
      "{\"b64\": \"" + good.substr(0, 998) + "AB==\"}",               // non-zero bits before the padding
      "{\"b64\": \"" + good,                                          // ends inside the value
      "{\"b64\": 12345" + std::string(2000, ' ') + "}",               // not a string
      "{\"x\": {\"b64\": \"" + good + "\"}}",                         // not at the top level
      "[{\"b64\": \"" + good + "\"}]",                                // not an object
      "{\"pad\": \"" + std::string(JsonB64Stream::kHeadBytes, ' ') + "\", \"b64\": \"" + good + "\"}",  // too far in
      std::string(5000, '\0'),
  };
  for (size_t k = 0; k < bodies.size(); ++k) {
    for (size_t piece : {size_t{1}, size_t{3}, size_t{64}, size_t{1} << 20}) {
      if (piece == 1 && bodies[k].size() > 20000) continue;
      auto s = feed(bodies[k], [&](size_t) { return piece; });
      EXPECT_FALSE(s.decoded()) << "body " << k << ", pieces of " << piece;
      EXPECT_EQ(s.take_json(), bodies[k]) << "body " << k << ", pieces of " << piece;
    }
  }
}

// The request the session hands on for a decoded body.
HttpRequest request_of(JsonB64Stream& s) {
  HttpRequest req;
  req.body = s.take_json();
  req.decoded_b64.emplace();
  req.decoded_b64->offset = s.out_offset();
  req.decoded_b64->size = s.out_size();
  req.decoded_b64->bytes = s.take_out();
  return req;
}

TEST(JsonB64Stream, TheRequestsTensorMatchesTheWholeBodys) {
  auto bytes = random_bytes(2 * JsonB64Stream::kWindowBytes + 5, 3);
  std::vector<uint8_t> floats(bytes.begin(), bytes.begin() + 4 * 1000);
  const std::string body = "{\"b64\": \"" + base64_encode(floats.data(), floats.size()) +
                           "\", \"shape\": [10, 100], \"dtype\": \"float32\"}";
  auto s = feed(body, [](size_t i) { return 1 + i * 37 % 5000; });
  ASSERT_TRUE(s.decoded());
  HttpRequest req = request_of(s);
  Tensor t = tensor_from_json_request(req, "body");
  ASSERT_EQ(t.dtype(), DType::kFloat32);
  ASSERT_EQ(t.shape(), (Shape{10, 100}));
  EXPECT_EQ(std::memcmp(t.data(), floats.data(), floats.size()), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  EXPECT_TRUE(req.decoded_b64->bytes.empty()) << "the tensor did not adopt the decoded bytes";

  // Too few bytes for the shape: the same message as the whole body gets.
  const std::string whole_bad =
      "{\"b64\": \"" + base64_encode(floats.data(), 8) + "\", \"shape\": [10, 100], \"dtype\": \"float32\"}";
  std::string copy = whole_bad;
  std::string whole_error, stream_error;
  try {
    tensor_from_json_body(copy, "body");
  } catch (const Error& e) {
    whole_error = e.message();
  }
  auto bad = feed(whole_bad, [](size_t) { return 7; });
  ASSERT_TRUE(bad.decoded());
  HttpRequest req2 = request_of(bad);
  try {
    tensor_from_json_request(req2, "body");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
    stream_error = e.message();
  }
  EXPECT_FALSE(whole_error.empty());
  EXPECT_EQ(stream_error, whole_error);
}

}  // namespace
}  // namespace tensord
