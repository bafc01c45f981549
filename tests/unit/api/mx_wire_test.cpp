// MX tensors on the wire (api/mx_wire.h): safetensors split/join, the JSON
// form, byte-identical re-encoding and malformed descriptions (bad_request).
#include "api/mx_wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api/json_tensor.h"
#include "api/safetensors.h"

namespace tensord {
namespace {

Tensor random_mx(kernels::MxFormat f, Shape shape, int64_t axis, uint32_t seed) {
  Tensor q = mx_empty_host(make_mx_meta(f, 32, axis, std::move(shape), false, "t"));
  std::mt19937 rng(seed);
  auto* p = static_cast<uint8_t*>(q.data());
  for (size_t i = 0; i < q.nbytes(); ++i) p[i] = static_cast<uint8_t>(rng());
  return q;
}

bool same(const Tensor& a, const Tensor& b) {
  return a.meta().str() == b.meta().str() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

ErrorCode code_of_parse(const std::string& body) {
  try {
    parse_safetensors(std::make_shared<const std::string>(body));
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kInternal;  // accepted
}

TEST(MxWire, SafetensorsRoundTripIsByteIdentical) {
  Tensor a = random_mx(kernels::MxFormat::kFp4E2M1, {3, 64}, -1, 1);
  Tensor b = random_mx(kernels::MxFormat::kFp6E3M2, {32, 2, 3}, 0, 2);
  Tensor plain = Tensor::zeros_host(DType::kFloat32, {4});
  const std::string body = encode_safetensors({{"a", a}, {"p", plain}, {"dir/b", b}}, {{"note", "x"}});
  SafetensorsFile f = parse_safetensors(std::make_shared<const std::string>(body));
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.tensors[0].first, "a");
  EXPECT_TRUE(same(f.tensors[0].second, a));
  EXPECT_EQ(f.tensors[2].first, "dir/b");
  EXPECT_TRUE(same(f.tensors[2].second, b));
  EXPECT_FALSE(f.tensors[1].second.is_mx());
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"note", "x"}}));  // descriptions consumed
  EXPECT_EQ(encode_safetensors(f.tensors, f.metadata), body);
  // The wire entries and the description, as API.md 7 writes them.
  EXPECT_NE(body.find("\"a\":{\"dtype\":\"U8\",\"shape\":[3,32]"), std::string::npos);
  EXPECT_NE(body.find("\"a.scale\":{\"dtype\":\"F8_E8M0\",\"shape\":[3,2]"), std::string::npos);
  EXPECT_EQ(mx_metadata_json(*a.meta().mx), "{\"mx\":\"mxfp4_e2m1\",\"block_size\":32,\"axis\":-1,\"shape\":[3,64]}");
}

TEST(MxWire, JsonRoundTrip) {
  Tensor q = random_mx(kernels::MxFormat::kFp8E5M2, {2, 32}, 1, 3);
  for (bool b64 : {false, true}) {
    Tensor back = tensor_from_json_string(tensor_to_json_string(q, b64), "t");
    EXPECT_TRUE(same(back, q)) << b64;
  }
}

TEST(MxWire, MalformedDescriptionsAreBadRequest) {
  Tensor q = random_mx(kernels::MxFormat::kFp8E4M3, {2, 32}, -1, 4);
  const std::string good = encode_safetensors({{"w", q}}, {});
  const std::string desc = mx_metadata_json(*q.meta().mx);
  auto with_desc = [&](const std::string& d) {
    std::string b = good;
    std::string esc;
    for (char c : desc) esc += c == '"' ? std::string("\\\"") : std::string(1, c);
    std::string dsc;
    for (char c : d) dsc += c == '"' ? std::string("\\\"") : std::string(1, c);
    const size_t pos = b.find(esc);
    EXPECT_NE(pos, std::string::npos);
    b.replace(pos, esc.size(), dsc);
    // Keep the header length right (8-byte prefix).
    uint64_t n = 0;
    std::memcpy(&n, b.data(), 8);
    n = n + dsc.size() - esc.size();
    std::memcpy(b.data(), &n, 8);
    return b;
  };
  EXPECT_EQ(code_of_parse(good), ErrorCode::kInternal);
  for (const std::string d : {
           "{\"mx\":\"mxfp9\",\"block_size\":32,\"axis\":-1,\"shape\":[2,32]}",
           "{\"mx\":\"mxfp8_e4m3\",\"block_size\":16,\"axis\":-1,\"shape\":[2,32]}",  // 4 scales, file has 2
           "{\"mx\":\"mxfp8_e4m3\",\"block_size\":32,\"axis\":-1,\"shape\":[2,64]}",  // packed size
           "{\"mx\":\"mxfp8_e4m3\",\"block_size\":32,\"axis\":5,\"shape\":[2,32]}",   // axis
           "{\"mx\":\"mxfp8_e4m3\",\"block_size\":32,\"axis\":-1}",                   // no shape
           "{\"mx\":\"mxfp8_e4m3\",\"block_size\":32,\"axis\":-1,\"shape\":[2,32],\"x\":1}",
           "{\"mx\":\"mxfp8_e4m3\",\"block_size\":32.5,\"axis\":-1,\"shape\":[2,32]}",
           "{\"mx\":\"mxfp8_e4m3\",\"block_size\":32,\"axis\":-1,\"shape\":[2,-32]}",
           "{\"mx\":\"mxfp8_e4m3\",",
       }) {
    EXPECT_EQ(code_of_parse(with_desc(d)), ErrorCode::kBadRequest) << d;
  }
  // Not an MX description (no "mx" key): the entries stay plain tensors.
  SafetensorsFile f = parse_safetensors(std::make_shared<const std::string>(with_desc("{\"note\":1}")));
  EXPECT_EQ(f.tensors.size(), 2u);
  EXPECT_FALSE(f.tensors[0].second.is_mx());
}

TEST(MxWire, AnMxNameThatIsAMetadataKeyIsRefused) {
  Tensor q = random_mx(kernels::MxFormat::kFp4E2M1, {1, 32}, -1, 5);
  try {
    encode_safetensors({{"response", q}}, {{"response", "{}"}});
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
  }
}

}  // namespace
}  // namespace tensord
