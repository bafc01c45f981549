#include "api/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "ops/error.h"

namespace tensord {
namespace {

std::shared_ptr<const std::string> body_of(const std::string& header, const std::string& data = {},
                                           uint64_t claimed = UINT64_MAX) {
  std::string b(8, '\0');
  uint64_t n = claimed == UINT64_MAX ? header.size() : claimed;
  std::memcpy(b.data(), &n, 8);
  return std::make_shared<const std::string>(b + header + data);
}

void expect_bad(std::shared_ptr<const std::string> body, const std::string& needle) {
  try {
    parse_safetensors(std::move(body));
    ADD_FAILURE() << "accepted a body expected to mention: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
    EXPECT_NE(e.message().find(needle), std::string::npos) << "message: " << e.message() << "\nwanted: " << needle;
  }
}
void expect_bad(const std::string& header, const std::string& data, const std::string& needle) {
  expect_bad(body_of(header, data), needle);
}

Tensor random_tensor(DType dt, Shape shape, std::mt19937_64& rng) {
  Tensor t = Tensor::empty_host(dt, std::move(shape));
  auto* p = static_cast<unsigned char*>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<unsigned char>(rng());
  if (dt == DType::kBool) {
    for (size_t i = 0; i < t.nbytes(); ++i) p[i] &= 1;
  }
  return t;
}

bool same(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

bool inside(const Tensor& t, const std::string& body) {
  auto p = reinterpret_cast<uintptr_t>(t.data());
  auto b = reinterpret_cast<uintptr_t>(body.data());
  return p >= b && p < b + body.size();
}

TEST(Safetensors, EveryTagRoundTripsBitExact) {
  std::mt19937_64 rng(3);
  std::vector<std::pair<std::string, Tensor>> in;
  const Shape shapes[] = {{3}, {2, 3}, {}, {1, 1, 5}, {0}, {7}};
  for (int i = 0; i < kNumDTypes; ++i) {
    DType dt = static_cast<DType>(i);
    in.emplace_back(std::string(dtype_safetensors_tag(dt)) + ".w", random_tensor(dt, shapes[i % 6], rng));
  }
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"request", "{\"a\": [1, 2]}"}};
  auto body = std::make_shared<const std::string>(encode_safetensors(in, meta));

  // Header: length multiple of 8, padded with spaces, a JSON object.
  uint64_t n;
  std::memcpy(&n, body->data(), 8);
  EXPECT_EQ(n % 8, 0u);
  rapidjson::Document hdr;
  hdr.Parse(body->data() + 8, n);
  ASSERT_FALSE(hdr.HasParseError());
  EXPECT_TRUE(hdr.HasMember("__metadata__"));
  EXPECT_STREQ(hdr["C128.w"]["dtype"].GetString(), "C128");
  // Offsets: contiguous from 0 to the end (as the Rust crate requires), each
  // a multiple of its element size.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& m : hdr.GetObject()) {
    if (std::string(m.name.GetString()) == "__metadata__") continue;
    uint64_t b = m.value["data_offsets"][0].GetUint64(), e = m.value["data_offsets"][1].GetUint64();
    auto dt = dtype_from_safetensors_tag(m.value["dtype"].GetString());
    ASSERT_TRUE(dt);
    EXPECT_EQ(b % dtype_size(*dt), 0u) << m.name.GetString();
    ranges.emplace_back(b, e);
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t pos = 0;
  for (auto [b, e] : ranges) {
    EXPECT_EQ(b, pos);
    pos = e;
  }
  EXPECT_EQ(8 + n + pos, body->size());

  SafetensorsFile f = parse_safetensors(body);
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.tensors.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(f.tensors[i].first, in[i].first);  // header order = given order
    EXPECT_TRUE(same(f.tensors[i].second, in[i].second)) << in[i].first;
    if (in[i].second.nbytes() > 0) {
      EXPECT_TRUE(inside(f.tensors[i].second, *body)) << "not zero-copy: " << in[i].first;
    }
  }
  // The tensors keep the body alive.
  std::string copy = *body;
  const void* p = f.tensors[0].second.data();
  body.reset();
  EXPECT_EQ(f.tensors[0].second.data(), p);
  EXPECT_EQ(std::memcmp(p, in[0].second.data(), in[0].second.nbytes()), 0);
}

TEST(Safetensors, EmptyFileRoundTrips) {
  std::string s = encode_safetensors({}, {});
  EXPECT_EQ(s.size() % 8, 0u);
  SafetensorsFile f = parse_safetensors(std::make_shared<const std::string>(s));
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_TRUE(f.metadata.empty());
}

TEST(Safetensors, ParsesAHandWrittenFileAndCopiesUnalignedTensors) {
  // U8[1] at 0, F32[2] at 1 (unaligned: copied), I16[1] at 9 (unaligned),
  // a gap, then trailing bytes. Header length 8*k keeps the data 8-aligned.
  std::string header =
      R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[1,9]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
      R"("c":{"dtype":"I16","shape":[],"data_offsets":[9,11]},"__metadata__":{"k":"v"}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data(16, '\0');
  data[0] = 7;
  float fv[2] = {1.5f, -2.0f};
  std::memcpy(&data[1], fv, 8);
  int16_t iv = -300;
  std::memcpy(&data[9], &iv, 2);
  auto body = body_of(header, data);
  SafetensorsFile f = parse_safetensors(body);
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.tensors[0].first, "b");
  EXPECT_EQ(f.tensors[1].first, "a");
  EXPECT_EQ(f.tensors[2].first, "c");
  const Tensor& b = f.tensors[0].second;
  EXPECT_EQ(b.dtype(), DType::kFloat32);
  EXPECT_EQ(b.data_ptr<float>()[0], 1.5f);
  EXPECT_EQ(b.data_ptr<float>()[1], -2.0f);
  EXPECT_FALSE(inside(b, *body));  // misaligned: copied
  EXPECT_EQ(f.tensors[1].second.data_ptr<uint8_t>()[0], 7);
  EXPECT_TRUE(inside(f.tensors[1].second, *body));
  EXPECT_EQ(f.tensors[2].second.shape(), Shape{});
  EXPECT_EQ(f.tensors[2].second.data_ptr<int16_t>()[0], -300);
  EXPECT_EQ(f.metadata.at("k"), "v");
}

TEST(Safetensors, RejectsShortOrOversizedHeaders) {
  expect_bad(std::make_shared<const std::string>(""), "shorter than the 8-byte");
  expect_bad(std::make_shared<const std::string>("1234567"), "shorter than the 8-byte");
  expect_bad(body_of("{}", "", 100), "runs past the end");
  expect_bad(body_of("{}", "", 1), "invalid JSON");
  expect_bad(body_of("{}", "", 100'000'001), "exceeds the limit of 100000000");
  expect_bad(body_of("{}", "", UINT64_MAX - 1), "exceeds the limit");
  expect_bad(body_of("", ""), "invalid JSON");
}

TEST(Safetensors, RejectsMalformedHeaders) {
  expect_bad("[]", "", "must be a JSON object");
  expect_bad("\"x\"", "", "must be a JSON object");
  expect_bad("{} x", "", "invalid JSON");
  expect_bad(std::string("{}\0\0", 4), "", "NUL byte");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}", std::string(4, '\0'),
             "invalid JSON");
  expect_bad("{\"\xff\": 1}", "", "invalid JSON");  // invalid UTF-8
  std::string deep = "{\"a\":" + std::string(1000, '[') + std::string(1000, ']') + "}";
  expect_bad(deep, "", "safetensors header: invalid JSON at offset");
  expect_bad(deep, "", "nested deeper");
}

TEST(Safetensors, RejectsBadEntries) {
  const std::string data(64, '\0');
  expect_bad(R"({"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})", data, "unknown dtype \"F128\"");
  expect_bad(R"({"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", data, "unknown dtype");
  expect_bad(R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", data, "\"dtype\" must be a string");
  expect_bad(R"({"a":[1]})", data, "must be an object");
  expect_bad(R"({"a":{"dtype":"F32","shape":[1]}})", data, "needs \"dtype\", \"shape\" and \"data_offsets\"");
  expect_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}})", data, "unknown key \"extra\"");
  expect_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"shape":[1]}})", data, "given twice");
  expect_bad(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", data, "non-negative integers");
  expect_bad(R"({"a":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})", data, "non-negative integers");
  expect_bad(R"({"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", data, "non-negative integers");
  expect_bad(R"({"a":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,0]}})", data,
             "too many elements");
  expect_bad(R"({"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})", data,
             "rank 17");
  expect_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", data, "[begin, end]");
  expect_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", data, "[begin, end]");
  expect_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0.0,4]}})", data, "[begin, end]");
  expect_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":"0-4"}})", data, "[begin, end]");
}

TEST(Safetensors, RejectsBadOffsets) {
  const std::string data(16, '\0');
  expect_bad(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})", data, "run past the 16-byte data section");
  expect_bad(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[17,17]}})", data, "run past");
  expect_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]}})", data, "run past");
  expect_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", data, "end before they begin");
  expect_bad(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", data, "span 4 bytes, F32[2] needs 8");
  expect_bad(R"({"a":{"dtype":"C128","shape":[1],"data_offsets":[0,8]}})", data, "needs 16");
  expect_bad(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      data, "overlap");
  expect_bad(
      R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[8,12]},"b":{"dtype":"U8","shape":[16],"data_offsets":[0,16]}})",
      data, "overlap");
  expect_bad(
      R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
      data, "overlap");
  // Touching ranges and empty tensors anywhere are fine.
  auto ok = parse_safetensors(body_of(
      R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]},)"
      R"("c":{"dtype":"F32","shape":[0,3],"data_offsets":[2,2]}})",
      data));
  EXPECT_EQ(ok.tensors.size(), 3u);
  EXPECT_EQ(ok.tensors[2].second.numel(), 0);
}

TEST(Safetensors, RejectsDuplicatesAndBadMetadata) {
  const std::string data(16, '\0');
  expect_bad(
      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
      data, "duplicate key \"a\"");
  expect_bad(R"({"__metadata__":{},"__metadata__":{}})", data, "duplicate key \"__metadata__\"");
  expect_bad(R"({"__metadata__":{"a":1}})", data, "value of \"a\" must be a string");
  expect_bad(R"({"__metadata__":{"a":null}})", data, "must be a string");
  expect_bad(R"({"__metadata__":{"a":{"b":"c"}}})", data, "must be a string");
  expect_bad(R"({"__metadata__":["a"]})", data, "must be an object of strings");
  expect_bad(R"({"__metadata__":{"a":"x","a":"y"}})", data, "duplicate \"__metadata__\" key");
}

TEST(Safetensors, RejectsBoolBytesOtherThanZeroOrOne) {
  std::string data = {0, 1, 2, 0};
  expect_bad(R"({"m":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]}})", data, "bool byte 2 is 2");
}

TEST(Safetensors, EncoderRejectsBadNames) {
  Tensor t = Tensor::zeros_host(DType::kFloat32, {2});
  try {
    encode_safetensors({{"a", t}, {"a", t}}, {});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
    EXPECT_NE(e.message().find("duplicate tensor name \"a\""), std::string::npos);
  }
  EXPECT_THROW(encode_safetensors({{"__metadata__", t}}, {}), Error);
}

TEST(Safetensors, EncoderOrdersDataByElementSizeKeepingHeaderOrder) {
  std::vector<std::pair<std::string, Tensor>> in = {{"u8", Tensor::zeros_host(DType::kUInt8, {3})},
                                                    {"f64", Tensor::zeros_host(DType::kFloat64, {1})},
                                                    {"f32", Tensor::zeros_host(DType::kFloat32, {1})},
                                                    {"bool", Tensor::zeros_host(DType::kBool, {1})}};
  std::string s = encode_safetensors(in, {});
  uint64_t n;
  std::memcpy(&n, s.data(), 8);
  rapidjson::Document d;
  d.Parse(s.data() + 8, n);
  ASSERT_TRUE(d.IsObject());
  auto it = d.MemberBegin();
  EXPECT_STREQ(it->name.GetString(), "u8");
  EXPECT_EQ(d["f64"]["data_offsets"][0].GetUint64(), 0u);
  EXPECT_EQ(d["f32"]["data_offsets"][0].GetUint64(), 8u);
  EXPECT_EQ(d["u8"]["data_offsets"][0].GetUint64(), 12u);
  EXPECT_EQ(d["bool"]["data_offsets"][0].GetUint64(), 15u);
  EXPECT_EQ(d["bool"]["data_offsets"][1].GetUint64(), 16u);
  EXPECT_FALSE(d.HasMember("__metadata__"));
  EXPECT_EQ(s.size(), 8 + n + 16);
  EXPECT_EQ(s[8 + n - 1] == ' ' || s[8 + n - 1] == '}', true);
}

TEST(Safetensors, WrappedStorageKeepsOwnerAlive) {
  auto owner = std::make_shared<std::string>(64, 'z');
  std::weak_ptr<std::string> weak = owner;
  auto s = Storage::wrap(owner->data(), owner->size(), owner);
  owner.reset();
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(static_cast<char*>(s->data())[63], 'z');
  EXPECT_EQ(s->nbytes(), 64u);
  s.reset();
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace tensord
