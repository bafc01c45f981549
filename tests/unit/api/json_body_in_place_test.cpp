// tensor_from_json_body with a BodyShare (API.md 3.1): a large
// b64 payload is decoded over its own text in the request body, and the
// tensor aliases the body instead of a second buffer.
#include <gtest/gtest.h>

#include <complex>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "api/base64.h"
#include "api/json_tensor.h"
#include "ops/error.h"

namespace tensord {
namespace {

struct Shared {
  std::string body;
  std::shared_ptr<const std::string> owner;  // what `share` moved out
  BodyShare share() {
    return [this] {
      owner = std::make_shared<const std::string>(std::move(body));
      return owner;
    };
  }
};

template <class T>
std::vector<T> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(rng() % 1000) / static_cast<T>(7);
  return v;
}

std::string body_of(const std::string& dtype, size_t n, const void* bytes, size_t nbytes, const std::string& pad = "") {
  return "{\"dtype\": \"" + dtype + "\"," + pad + " \"shape\": [" + std::to_string(n) + "], \"b64\": \"" +
         base64_encode(bytes, nbytes) + "\"}";
}

bool inside(const void* p, const std::string& s) {
  const auto* c = static_cast<const char*>(p);
  return c >= s.data() && c < s.data() + s.capacity();
}

TEST(JsonBodyInPlace, ALargePayloadIsDecodedIntoItsOwnBody) {
  const size_t n = (size_t{3} << 20) / 8 + 5;  // 3 MiB of float64, not a multiple of 3 bytes per group
  auto v = random_values<double>(n, 1);
  // Prefixes of every length mod 64 move the text's offset (and the aligned
  // place its bytes land) around.
  for (size_t pad = 0; pad < 64; pad += 7) {
    Shared s;
    s.body = body_of("float64", n, v.data(), v.size() * 8, std::string(pad, ' '));
    const void* text = s.body.data();
    Tensor t = tensor_from_json_body(s.body, "body", s.share());
    ASSERT_NE(s.owner, nullptr) << "the body was not shared";
    EXPECT_EQ(s.owner->data(), text);
    EXPECT_TRUE(inside(t.data(), *s.owner)) << "decoded into a second buffer";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % alignof(double), 0u);
    ASSERT_EQ(t.numel(), static_cast<int64_t>(n));
    EXPECT_EQ(std::memcmp(t.data(), v.data(), n * 8), 0) << "pad " << pad;
  }
}

TEST(JsonBodyInPlace, EveryWidthKeepsItsAlignment) {
  const size_t n = (size_t{1} << 20) / 16 + 3;
  auto re = random_values<double>(2 * n, 2);
  Shared s;
  s.body = body_of("complex128", n, re.data(), re.size() * 8, " ");
  Tensor t = tensor_from_json_body(s.body, "body", s.share());
  EXPECT_TRUE(inside(t.data(), *s.owner));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 8, 0u);
  EXPECT_EQ(std::memcmp(t.data(), re.data(), re.size() * 8), 0);

  std::vector<uint8_t> bytes((size_t{1} << 20) + 1);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31);
  Shared u;
  u.body = body_of("uint8", bytes.size(), bytes.data(), bytes.size());
  Tensor b = tensor_from_json_body(u.body, "body", u.share());
  EXPECT_TRUE(inside(b.data(), *u.owner));
  EXPECT_EQ(std::memcmp(b.data(), bytes.data(), bytes.size()), 0);
}

TEST(JsonBodyInPlace, ASmallPayloadOrNoShareIsCopied) {
  auto v = random_values<float>(1000, 3);
  Shared s;
  s.body = body_of("float32", v.size(), v.data(), v.size() * 4);
  Tensor t = tensor_from_json_body(s.body, "body", s.share());
  EXPECT_EQ(s.owner, nullptr) << "a small body is not kept for its tensor";
  EXPECT_EQ(std::memcmp(t.data(), v.data(), v.size() * 4), 0);

  auto w = random_values<float>(size_t{1} << 19, 4);
  std::string body = body_of("float32", w.size(), w.data(), w.size() * 4);
  Tensor c = tensor_from_json_body(body, "body");
  EXPECT_FALSE(inside(c.data(), body));
  EXPECT_EQ(std::memcmp(c.data(), w.data(), w.size() * 4), 0);
}

void expect_bad(std::string body, const std::string& needle) {
  Shared s;
  s.body = std::move(body);
  try {
    tensor_from_json_body(s.body, "body", s.share());
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
    EXPECT_NE(e.message().find(needle), std::string::npos) << e.message();
  }
  EXPECT_EQ(s.owner, nullptr) << "a refused body is not shared";
}

TEST(JsonBodyInPlace, BadPayloadsAreRefusedByName) {
  std::vector<uint8_t> bytes(size_t{2} << 20, 1);
  std::string good = body_of("uint8", bytes.size(), bytes.data(), bytes.size());
  // A character outside the alphabet deep inside the text (after decoding
  // has overwritten the text before it).
  std::string bad = good;
  bad[bad.size() - 1000] = '!';
  expect_bad(bad, "b64");
  // A bool byte that is not 0 or 1.
  std::string boolean = body_of("bool", bytes.size(), bytes.data(), bytes.size());
  boolean.replace(boolean.find("AQEB"), 4, "AQIB");
  expect_bad(boolean, "bool byte");
  // A size that does not match the shape.
  std::string wrong =
      "{\"dtype\": \"uint8\", \"shape\": [5], \"b64\": \"" + base64_encode(bytes.data(), bytes.size()) + "\"}";
  expect_bad(wrong, "needs 5");
}

TEST(JsonBodyInPlace, TheValueIsCutOutOnlyWhereItIsTheTensorsOwn) {
  std::vector<uint8_t> bytes(size_t{1} << 20, 7);
  const std::string text = base64_encode(bytes.data(), bytes.size());
  // Spaces around the colon, the value last or first: still its own.
  for (const std::string& body :
       {"{\"dtype\":\"uint8\",\"shape\":[1048576],\"b64\" :\n \"" + text + "\"}",
        "{\"b64\":\"" + text + "\", \"name\": \"b64\", \"dtype\":\"uint8\",\"shape\":[1048576]}"}) {
    Shared s;
    s.body = body;
    Tensor t = tensor_from_json_body(s.body, "body", s.share());
    ASSERT_NE(s.owner, nullptr);
    EXPECT_TRUE(inside(t.data(), *s.owner));
    EXPECT_EQ(std::memcmp(t.data(), bytes.data(), bytes.size()), 0);
  }
  // A "b64" inside the name's object is not the tensor's: the tensor's
  // empty one stands.
  Shared n;
  n.body = "{\"name\": {\"b64\": \"" + text + "\"}, \"dtype\": \"uint8\", \"shape\": [0], \"b64\": \"\"}";
  Tensor empty = tensor_from_json_body(n.body, "body", n.share());
  EXPECT_EQ(empty.numel(), 0);
  // An escaped slash ("\/" is JSON for "/") is unescaped by the parser.
  std::string slashed = text;
  size_t slashes = 0;
  for (size_t i = 0; i + 4 <= slashed.size(); i += 4) {
    if (slashed[i] == 'B') {
      slashed[i] = '/';
      ++slashes;
    }
  }
  ASSERT_GT(slashes, 0u);
  std::string escaped;
  for (char c : slashed) {
    if (c == '/') escaped += '\\';
    escaped += c;
  }
  const std::vector<uint8_t> want = [&] {
    std::string raw = base64_decode(slashed);
    return std::vector<uint8_t>(raw.begin(), raw.end());
  }();
  Shared e;
  e.body = "{\"dtype\":\"uint8\",\"shape\":[" + std::to_string(want.size()) + "],\"b64\":\"" + escaped + "\"}";
  Tensor u = tensor_from_json_body(e.body, "body", e.share());
  ASSERT_EQ(u.numel(), static_cast<int64_t>(want.size()));
  EXPECT_EQ(std::memcmp(u.data(), want.data(), want.size()), 0);
  // Bytes that are not UTF-8 inside the cut value: the decoder refuses them.
  std::string bad = "{\"dtype\":\"uint8\",\"shape\":[1048576],\"b64\":\"" + text + "\"}";
  bad[bad.size() / 2] = static_cast<char>(0xC3);
  expect_bad(bad, "b64");
}

}  // namespace
}  // namespace tensord
