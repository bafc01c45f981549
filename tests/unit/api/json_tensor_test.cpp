#include "api/json_tensor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "api/base64.h"
#include "api/json_parse.h"
#include "ops/error.h"

namespace tensord {
namespace {

Tensor parse(const std::string& json) {
  return tensor_from_json_string(json, "x");
}

void expect_bad(const std::string& json, const std::string& needle) {
  try {
    parse(json);
    ADD_FAILURE() << "accepted: " << json;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadRequest) << json;
    EXPECT_EQ(e.message().rfind("x: ", 0), 0u) << e.message();
    EXPECT_NE(e.message().find(needle), std::string::npos) << "message: " << e.message() << "\ninput: " << json;
  }
}

template <class T>
std::vector<T> values(const Tensor& t) {
  std::vector<T> v(static_cast<size_t>(t.numel()));
  if (!v.empty()) std::memcpy(v.data(), t.data(), t.nbytes());
  return v;
}

Tensor from_bytes(DType dt, Shape shape, const std::vector<unsigned char>& bytes) {
  Tensor t = Tensor::empty_host(dt, std::move(shape));
  EXPECT_EQ(t.nbytes(), bytes.size());
  if (!bytes.empty()) std::memcpy(t.data(), bytes.data(), bytes.size());
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Is the element at byte offset `p` of dtype `dt` a NaN (which JSON data
// does not round-trip bit-exactly: it comes back as the canonical NaN)?
bool is_nan_bits(DType dt, const unsigned char* p) {
  switch (dt) {
    case DType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
    }
    case DType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return (h & 0x7F80) == 0x7F80 && (h & 0x7F);
    }
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return std::isnan(f);
    }
    case DType::kFloat64: {
      double f;
      std::memcpy(&f, p, 8);
      return std::isnan(f);
    }
    case DType::kComplex64:
      return is_nan_bits(DType::kFloat32, p) || is_nan_bits(DType::kFloat32, p + 4);
    case DType::kComplex128:
      return is_nan_bits(DType::kFloat64, p) || is_nan_bits(DType::kFloat64, p + 8);
    case DType::kFloat8E4M3FN:
      return (*p & 0x7F) == 0x7F;
    case DType::kFloat8E5M2:
      return (*p & 0x7F) > 0x7C;
    case DType::kFloat8E8M0FNU:
      return *p == 0xFF;
    default:
      return false;
  }
}

// n random elements of `dt` (bool: 0/1; floats: any non-NaN bit pattern).
std::vector<unsigned char> random_elements(DType dt, int64_t n, std::mt19937_64& rng, bool allow_nan) {
  size_t es = dtype_size(dt);
  std::vector<unsigned char> out(static_cast<size_t>(n) * es);
  for (int64_t i = 0; i < n; ++i) {
    unsigned char* p = out.data() + static_cast<size_t>(i) * es;
    do {
      for (size_t b = 0; b < es; ++b) p[b] = static_cast<unsigned char>(rng());
      if (dt == DType::kBool) p[0] &= 1;
    } while (!allow_nan && is_nan_bits(dt, p));
  }
  return out;
}

std::vector<DType> all_dtypes() {
  std::vector<DType> v;
  for (int i = 0; i < kNumDTypes; ++i) v.push_back(static_cast<DType>(i));
  return v;
}

// Nested JSON text of a flat list of element texts.
std::string nest(const std::vector<std::string>& elems, const Shape& shape, size_t dim, size_t& pos) {
  if (dim == shape.size()) return elems[pos++];
  std::string s = "[";
  for (int64_t i = 0; i < shape[dim]; ++i) {
    if (i) s += ",";
    s += nest(elems, shape, dim + 1, pos);
  }
  return s + "]";
}

// Splits the flat "data":[...] of an encoded tensor into element texts.
std::vector<std::string> flat_elements(const std::string& json) {
  rapidjson::Document d;
  parse_json(json, d, "t");
  std::vector<std::string> out;
  for (const auto& e : d["data"].GetArray()) {
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    e.Accept(w);
    out.emplace_back(sb.GetString());
  }
  return out;
}

// ---- round trips ----

TEST(JsonTensor, EveryDtypeRoundTripsFlatNestedAndB64) {
  std::mt19937_64 rng(42);
  const Shape shape = {3, 2, 4};
  for (DType dt : all_dtypes()) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor t = from_bytes(dt, shape, random_elements(dt, 24, rng, false));
    std::string flat = tensor_to_json_string(t, false);
    Tensor back = parse(flat);
    EXPECT_TRUE(same_bytes(t, back)) << flat;

    // The same elements nested by the shape.
    auto elems = flat_elements(flat);
    ASSERT_EQ(elems.size(), 24u);
    size_t pos = 0;
    std::string nested = "{\"dtype\":\"" + std::string(dtype_name(dt)) +
                         "\",\"shape\":[3,2,4],\"data\":" + nest(elems, shape, 0, pos) + "}";
    EXPECT_TRUE(same_bytes(t, parse(nested))) << nested;
    // Without "shape", the nesting gives it.
    pos = 0;
    std::string inferred =
        "{\"dtype\":\"" + std::string(dtype_name(dt)) + "\",\"data\":" + nest(elems, shape, 0, pos) + "}";
    EXPECT_TRUE(same_bytes(t, parse(inferred))) << inferred;

    // b64 is bit-exact, NaN payloads included.
    Tensor raw = from_bytes(dt, shape, random_elements(dt, 24, rng, true));
    std::string b64 = tensor_to_json_string(raw, true);
    EXPECT_NE(b64.find("\"b64\":"), std::string::npos);
    EXPECT_EQ(b64.find("\"data\""), std::string::npos);
    EXPECT_TRUE(same_bytes(raw, parse(b64))) << b64;
  }
}

TEST(JsonTensor, EveryNarrowFloatCodeRoundTripsThroughText) {
  for (DType dt :
       {DType::kFloat16, DType::kBFloat16, DType::kFloat8E4M3FN, DType::kFloat8E5M2, DType::kFloat8E8M0FNU}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const size_t es = dtype_size(dt);
    const int64_t codes = int64_t{1} << (8 * es);
    std::vector<unsigned char> bytes;
    for (int64_t c = 0; c < codes; ++c) {
      unsigned char b[16] = {static_cast<unsigned char>(c), static_cast<unsigned char>(c >> 8)};
      if (is_nan_bits(dt, b)) continue;
      bytes.insert(bytes.end(), b, b + es);
    }
    Tensor t = from_bytes(dt, {static_cast<int64_t>(bytes.size() / es)}, bytes);
    EXPECT_TRUE(same_bytes(t, parse(tensor_to_json_string(t, false))));
  }
}

TEST(JsonTensor, RandomFloat32AndFloat64BitsRoundTripThroughText) {
  std::mt19937_64 rng(7);
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kComplex64}) {
    Tensor t = from_bytes(dt, {20000}, random_elements(dt, 20000, rng, false));
    EXPECT_TRUE(same_bytes(t, parse(tensor_to_json_string(t, false)))) << dtype_name(dt);
  }
}

TEST(JsonTensor, PrintsShortestFloatText) {
  std::vector<float> f = {0.1f,      1.0f,  -0.0f,         std::nanf(""), INFINITY,
                          -INFINITY, 1e20f, 3.4028235e38f, 1.4e-45f,      100.0f};
  Tensor t = Tensor::empty_host(DType::kFloat32, {10});
  std::memcpy(t.data(), f.data(), 40);
  EXPECT_EQ(tensor_to_json_string(t),
            "{\"dtype\":\"float32\",\"shape\":[10],\"data\":[0.1,1.0,-0.0,\"nan\",\"inf\",\"-inf\",1e+20,"
            "3.4028235e+38,1e-45,100.0]}");
  std::vector<double> d = {0.1, 1e300, -2.0};
  Tensor t64 = Tensor::empty_host(DType::kFloat64, {3});
  std::memcpy(t64.data(), d.data(), 24);
  EXPECT_EQ(tensor_to_json_string(t64), "{\"dtype\":\"float64\",\"shape\":[3],\"data\":[0.1,1e+300,-2.0]}");
  // bfloat16 prints its exact value (as a float32), not the decimal it came from.
  Tensor bf = parse(R"({"dtype":"bfloat16","shape":[2],"data":[0.1, 1]})");
  EXPECT_EQ(values<uint16_t>(bf), (std::vector<uint16_t>{0x3DCD, 0x3F80}));
  EXPECT_EQ(tensor_to_json_string(bf), "{\"dtype\":\"bfloat16\",\"shape\":[2],\"data\":[0.100097656,1.0]}");
}

TEST(JsonTensor, PrettyWriterIsSupported) {
  Tensor t = parse(R"({"dtype":"int32","shape":[2],"data":[1,-2]})");
  rapidjson::StringBuffer sb;
  JsonPrettyWriter w(sb);
  tensor_to_json(t, w, false);
  Tensor back = parse(sb.GetString());
  EXPECT_TRUE(same_bytes(t, back));
}

TEST(JsonTensor, IntegerAndBoolValues) {
  Tensor t = parse(R"({"dtype":"int64","shape":[4],"data":[-9223372036854775808, 9223372036854775807, 0, 1e3]})");
  EXPECT_EQ(values<int64_t>(t),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 0, 1000}));
  EXPECT_EQ(tensor_to_json_string(t),
            "{\"dtype\":\"int64\",\"shape\":[4],\"data\":[-9223372036854775808,9223372036854775807,0,1000]}");
  EXPECT_EQ(values<int8_t>(parse(R"({"dtype":"int8","data":[-128, 127, true]})")), (std::vector<int8_t>{-128, 127, 1}));
  EXPECT_EQ(values<uint8_t>(parse(R"({"dtype":"uint8","data":[0, 255]})")), (std::vector<uint8_t>{0, 255}));
  Tensor b = parse(R"({"dtype":"bool","shape":[2,2],"data":[[true,false],[1,0]]})");
  EXPECT_EQ(values<uint8_t>(b), (std::vector<uint8_t>{1, 0, 1, 0}));
  EXPECT_EQ(tensor_to_json_string(b), "{\"dtype\":\"bool\",\"shape\":[2,2],\"data\":[true,false,true,false]}");
}

TEST(JsonTensor, NonFiniteStrings) {
  Tensor t = parse(R"({"dtype":"float32","data":["nan","NaN","inf","+inf","-inf","Infinity","-Infinity","INF"]})");
  auto v = values<float>(t);
  ASSERT_EQ(v.size(), 8u);
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
  EXPECT_EQ(v[2], INFINITY);
  EXPECT_EQ(v[3], INFINITY);
  EXPECT_EQ(v[4], -INFINITY);
  EXPECT_EQ(v[5], INFINITY);
  EXPECT_EQ(v[6], -INFINITY);
  EXPECT_EQ(v[7], INFINITY);
  Tensor h = parse(R"({"dtype":"float16","data":["inf","nan"]})");
  EXPECT_EQ(values<uint16_t>(h)[0], 0x7C00);
  Tensor e4 = parse(R"({"dtype":"float8_e4m3fn","data":["inf", 1e9]})");
  EXPECT_EQ(values<uint8_t>(e4), (std::vector<uint8_t>{0x7E, 0x7E}));  // saturates
  expect_bad(R"({"dtype":"float32","data":["nanx"]})", "element 0");
  expect_bad(R"({"dtype":"float32","data":[1,"infinite"]})", "element 1");
  expect_bad(R"({"dtype":"float32","data":[""]})", "expected a number");
  expect_bad(R"({"dtype":"int32","data":["nan"]})", "expected an integer");
}

TEST(JsonTensor, Complex) {
  Tensor t = parse(R"({"dtype":"complex64","shape":[2,2],"data":[[[1,2],[3,-4]],[["nan","inf"],[0,-0.5]]]})");
  auto v = values<std::complex<float>>(t);
  EXPECT_EQ(v[0], std::complex<float>(1, 2));
  EXPECT_EQ(v[1], std::complex<float>(3, -4));
  EXPECT_TRUE(std::isnan(v[2].real()));
  EXPECT_EQ(v[2].imag(), INFINITY);
  EXPECT_EQ(v[3], std::complex<float>(0, -0.5f));
  EXPECT_EQ(tensor_to_json_string(t),
            "{\"dtype\":\"complex64\",\"shape\":[2,2],\"data\":[[1.0,2.0],[3.0,-4.0],[\"nan\",\"inf\"],[0.0,-0.5]]}");
  // Flat and scalar forms.
  EXPECT_EQ(parse(R"({"dtype":"complex128","shape":[2,2],"data":[[1,2],[3,4],[5,6],[7,8]]})").numel(), 4);
  Tensor s = parse(R"({"dtype":"complex128","shape":[],"data":[1.5,-2]})");
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(values<std::complex<double>>(s)[0], std::complex<double>(1.5, -2));
  Tensor inferred = parse(R"({"dtype":"cfloat","data":[[1,2],[3,4],[5,6]]})");
  EXPECT_EQ(inferred.shape(), Shape{3});
  expect_bad(R"({"dtype":"complex64","shape":[2],"data":[1,2]})", "complex elements are [re, im]");
  expect_bad(R"({"dtype":"complex64","shape":[3],"data":[1,2,3]})", "a complex element is [re, im]");
  expect_bad(R"({"dtype":"complex64","shape":[1],"data":[[1,2,3]]})", "x: ");
  expect_bad(R"({"dtype":"complex64","shape":[1],"data":[[1,[2]]]})", "x: ");
  expect_bad(R"({"dtype":"complex64","shape":[1],"data":[[1,"i"]]})", "element 0");
}

TEST(JsonTensor, KServeAndTorchNames) {
  EXPECT_EQ(parse(R"({"datatype":"FP32","shape":[1],"data":[1]})").dtype(), DType::kFloat32);
  EXPECT_EQ(parse(R"({"name":"input0","datatype":"INT64","shape":[2],"data":[1,2]})").dtype(), DType::kInt64);
  EXPECT_EQ(parse(R"({"dtype":"BOOL","data":[true]})").dtype(), DType::kBool);
  EXPECT_EQ(parse(R"({"dtype":"BF16","data":[1]})").dtype(), DType::kBFloat16);
  EXPECT_EQ(parse(R"({"dtype":"FP16","data":[1]})").dtype(), DType::kFloat16);
  EXPECT_EQ(parse(R"({"dtype":"torch.float64","data":[1]})").dtype(), DType::kFloat64);
  EXPECT_EQ(parse(R"({"dtype":"half","data":[1]})").dtype(), DType::kFloat16);
  EXPECT_EQ(parse(R"({"dtype":"float8_e8m0fnu","data":[1]})").dtype(), DType::kFloat8E8M0FNU);
  expect_bad(R"({"dtype":"float128","data":[1]})", "unknown dtype");
  expect_bad(R"({"dtype":"fp32","data":[1]})", "unknown dtype");
  expect_bad(R"({"dtype":5,"data":[1]})", "\"dtype\" must be a string");
  expect_bad(R"({"dtype":"float32","datatype":"FP32","data":[1]})", "given twice");
}

TEST(JsonTensor, ScalarsAndInference) {
  Tensor i = parse("7");
  EXPECT_EQ(i.dtype(), DType::kInt64);
  EXPECT_EQ(i.shape(), Shape{});
  EXPECT_EQ(values<int64_t>(i)[0], 7);
  EXPECT_EQ(tensor_to_json_string(i), "{\"dtype\":\"int64\",\"shape\":[],\"data\":[7]}");
  Tensor f = parse("2.5");
  EXPECT_EQ(f.dtype(), DType::kFloat32);
  EXPECT_EQ(values<float>(f)[0], 2.5f);
  EXPECT_EQ(parse("true").dtype(), DType::kBool);
  Tensor s = parse(R"({"dtype":"float64","shape":[],"data":1.5})");
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(values<double>(s)[0], 1.5);
  Tensor s1 = parse(R"({"dtype":"float64","shape":[],"data":[1.5]})");
  EXPECT_EQ(s1.shape(), Shape{});
  Tensor s2 = parse(R"({"dtype":"float32","data":"nan"})");
  EXPECT_EQ(s2.shape(), Shape{});
  EXPECT_TRUE(std::isnan(values<float>(s2)[0]));

  Tensor a = parse(R"({"data":[[1,2,3],[4,5,6]]})");
  EXPECT_EQ(a.dtype(), DType::kInt64);
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(values<int64_t>(a), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(parse(R"({"data":[true,false]})").dtype(), DType::kBool);
  EXPECT_EQ(parse(R"({"data":[1,2.0]})").dtype(), DType::kFloat32);
  EXPECT_EQ(parse(R"({"data":[1,"inf"]})").dtype(), DType::kFloat32);
  EXPECT_EQ(parse(R"({"data":[true,2]})").dtype(), DType::kInt64);
  Tensor e = parse(R"({"data":[]})");
  EXPECT_EQ(e.dtype(), DType::kFloat32);
  EXPECT_EQ(e.shape(), Shape{0});
  EXPECT_EQ(parse(R"({"data":[[[]]]})").shape(), (Shape{1, 1, 0}));
  EXPECT_EQ(parse(R"({"data":[[],[]]})").shape(), (Shape{2, 0}));
  EXPECT_EQ(parse(R"({"dtype":"int32","data":[[[1],[2]]]})").shape(), (Shape{1, 2, 1}));
}

TEST(JsonTensor, EmptyShapes) {
  Tensor t = parse(R"({"dtype":"float32","shape":[0,1099511627776],"data":[]})");
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.shape(), (Shape{0, int64_t{1} << 40}));
  EXPECT_EQ(parse(R"({"dtype":"int8","shape":[2,0],"data":[[],[]]})").shape(), (Shape{2, 0}));
  EXPECT_EQ(parse(R"({"dtype":"int8","shape":[2,0],"data":[]})").shape(), (Shape{2, 0}));
  EXPECT_EQ(parse(R"({"dtype":"int8","shape":[0],"b64":""})").numel(), 0);
  EXPECT_EQ(tensor_to_json_string(t), "{\"dtype\":\"float32\",\"shape\":[0,1099511627776],\"data\":[]}");
  // Flat data of 0 elements fits any 0-element shape; nested data must match.
  EXPECT_EQ(parse(R"({"dtype":"int8","shape":[1099511627776,0],"data":[]})").numel(), 0);
  expect_bad(R"({"dtype":"int8","shape":[1099511627776,0],"data":[[]]})", "expected a list of 1099511627776");
}

// ---- malformed input ----

TEST(JsonTensor, RejectsWrongCountsAndRaggedData) {
  expect_bad(R"({"dtype":"float32","shape":[2,2],"data":[1,2,3]})", "data has 3 elements, shape [2, 2] needs 4");
  expect_bad(R"({"dtype":"float32","shape":[2,2],"data":[1,2,3,4,5]})", "needs 4");
  expect_bad(R"({"dtype":"float32","shape":[2,2],"data":[[1,2],[3]]})", "at dimension 1");
  expect_bad(R"({"dtype":"float32","shape":[3,2],"data":[[1,2,3],[4,5,6]]})", "at dimension 0");
  expect_bad(R"({"dtype":"float32","data":[[1,2],[3]]})", "at dimension 1");
  expect_bad(R"({"dtype":"float32","data":[[1,2],3]})", "at dimension 1");
  expect_bad(R"({"dtype":"float32","data":[1,[2]]})", "element 1");
  expect_bad(R"({"dtype":"float32","shape":[2,2,2],"data":[[1,2],[3,4]]})", "matches neither");
  expect_bad(R"({"dtype":"float32","shape":[2],"data":5})", "matches neither");
  expect_bad(R"({"dtype":"float32","shape":[],"data":[]})", "data has 0 elements");
  expect_bad(R"({"dtype":"float32","shape":[1],"data":[{}]})", "got an object");
  expect_bad(R"({"dtype":"float32","shape":[1],"data":[null]})", "got null");
}

// Found by tests/fuzz (json_tensor_fuzz, corpus regress-shape-larger-than-data):
// with a dtype given, the tensor was allocated before nested data was
// checked against the shape, so a 50-byte body could ask for 15 GB, or for
// more than the host has (std::bad_alloc: a 500 instead of a 400).
TEST(JsonTensor, ShapeLargerThanNestedDataFailsBeforeAllocating) {
  expect_bad(R"({"dtype":"float32","shape":[3709551615],"data":[]})", "expected a list of 3709551615");
  expect_bad(R"({"dtype":"float64","shape":[70368744177664],"data":[]})", "expected a list of 70368744177664");
  expect_bad(R"({"dtype":"complex128","shape":[70368744177664,1],"data":[[[1,2]]]})", "at dimension 0");
  // Without "shape" the sizes are read off each level's first element:
  // 16 levels of 8 claim 2^48 float64 elements (2 PiB) in a few hundred bytes.
  std::string data = "0";
  for (int level = 0; level < 16; ++level) data = "[" + data + ",0,0,0,0,0,0,0]";
  expect_bad(R"({"dtype":"float64","data":)" + data + "}", "data does not match shape");
}

TEST(JsonTensor, RejectsBadShapes) {
  expect_bad(R"({"dtype":"float32","shape":[-1],"data":[]})", "non-negative integers");
  expect_bad(R"({"dtype":"float32","shape":[2.5],"data":[1,2]})", "non-negative integers");
  expect_bad(R"({"dtype":"float32","shape":["2"],"data":[1,2]})", "non-negative integers");
  expect_bad(R"({"dtype":"float32","shape":[18446744073709551615],"data":[]})", "non-negative integers");
  expect_bad(R"({"dtype":"float32","shape":2,"data":[1,2]})", "shape must be a list");
  expect_bad(R"({"dtype":"float32","shape":[1099511627776,1099511627776],"data":[]})", "too many elements");
  expect_bad(R"({"dtype":"float32","shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"data":[1]})", "rank 17");
  expect_bad(R"({"dtype":"float32","shape":[1099511627776,1099511627776],"b64":""})", "too many elements");
}

TEST(JsonTensor, RejectsIntegersOutOfRangeOrFractional) {
  expect_bad(R"({"dtype":"int8","data":[128]})", "out of range for int8");
  expect_bad(R"({"dtype":"int8","data":[-129]})", "out of range");
  expect_bad(R"({"dtype":"uint8","data":[-1]})", "out of range for uint8");
  expect_bad(R"({"dtype":"uint8","data":[256]})", "out of range");
  expect_bad(R"({"dtype":"int16","data":[32768]})", "out of range");
  expect_bad(R"({"dtype":"int32","data":[2147483648]})", "out of range");
  expect_bad(R"({"dtype":"int64","data":[9223372036854775808]})", "out of range");
  expect_bad(R"({"dtype":"int64","data":[1e19]})", "out of range");
  expect_bad(R"({"dtype":"int64","data":[9.3e18]})", "out of range");
  expect_bad(R"({"dtype":"int32","data":[0, 2.5]})", "element 1");
  expect_bad(R"({"dtype":"int32","shape":[1],"data":[[1]]})", "matches neither");
  expect_bad(R"({"dtype":"int32","shape":[2],"data":[1,[1]]})", "element 1 (row-major): expected an integer");
  expect_bad(R"({"dtype":"bool","data":[2]})", "expected true, false, 0 or 1");
  expect_bad(R"({"dtype":"bool","data":["true"]})", "expected true, false, 0 or 1");
  expect_bad(R"({"data":[9223372036854775808]})", "out of range");
  EXPECT_EQ(values<int64_t>(parse(R"({"dtype":"int64","data":[-9.2e18]})"))[0], -9200000000000000000);
}

TEST(JsonTensor, RejectsBadBase64) {
  expect_bad(R"({"dtype":"uint8","shape":[2],"b64":"AQI"})", "multiple of 4");
  expect_bad(R"({"dtype":"uint8","shape":[2],"b64":"AQ?="})", "invalid base64");
  expect_bad(R"({"dtype":"uint8","shape":[2],"b64":"AQ =" })", "invalid base64");
  expect_bad(R"({"dtype":"uint8","shape":[2],"b64":"AQJ="})", "non-zero bits");
  expect_bad(R"({"dtype":"uint8","shape":[3],"b64":"AQI="})", "b64 holds 2 bytes");
  expect_bad(R"({"dtype":"float32","shape":[1],"b64":"AQI="})", "needs 4");
  expect_bad(R"({"dtype":"uint8","shape":[2],"b64":5})", "must be a base64 string");
  expect_bad(R"({"shape":[2],"b64":"AQI="})", "\"dtype\" is required");
  expect_bad(R"({"dtype":"uint8","b64":"AQI="})", "\"shape\" is required");
  expect_bad(R"({"dtype":"bool","shape":[2],"b64":"AQI="})", "bool byte must be 0 or 1");
  Tensor t = parse(R"({"dtype":"uint8","shape":[2],"b64":"AQI="})");
  EXPECT_EQ(values<uint8_t>(t), (std::vector<uint8_t>{1, 2}));
}

TEST(JsonTensor, RejectsStructuralErrors) {
  expect_bad(R"("abc")", "expected a tensor");
  expect_bad("null", "expected a tensor");
  expect_bad("[1,2]", "expected a tensor");
  expect_bad(R"({"dtype":"float32"})", "needs \"data\" or \"b64\"");
  expect_bad(R"({"dtype":"uint8","shape":[2],"data":[1,2],"b64":"AQI="})", "not both");
  expect_bad(R"({"dtype":"float32","shpae":[2],"data":[1,2]})", "unknown key \"shpae\"");
  expect_bad(R"({"dtype":"float32","data":[1],"data":[2]})", "given twice");
  expect_bad(R"({"dtype":"float32","data":[1],)", "invalid JSON");
  expect_bad("", "invalid JSON");
  expect_bad("{\"dtype\":\"float32\",\"data\":[1]} x", "invalid JSON");
  expect_bad(std::string("{\"dtype\":\"float32\",\"data\":[1]}\0x", 32), "invalid JSON");
}

TEST(JsonTensor, DeepNestingIsBadRequestNotACrash) {
  for (int depth : {17, 18, 40, 100, 100000}) {
    std::string deep =
        std::string(static_cast<size_t>(depth), '[') + "1" + std::string(static_cast<size_t>(depth), ']');
    // Through the string entry point (depth pre-check) ...
    expect_bad("{\"dtype\":\"float32\",\"data\":" + deep + "}", depth == 17 ? "rank 17" : "nested deeper");
    if (depth > 63) {  // parse_json's own bound
      expect_bad("{\"dtype\":\"float32\",\"data\":" + deep + "}", "nested deeper than 64 levels");
    }
    // ... and through an already parsed document (the codec's own limit).
    rapidjson::Document d;
    parse_json("{\"data\":" + deep + "}", d, "t", 1 << 20);
    try {
      tensor_from_json(d, "y");
      ADD_FAILURE() << "accepted depth " << depth;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
      EXPECT_NE(e.message().find("y: "), std::string::npos);
    }
  }
  // 16 dimensions is fine; 16 + [re, im] too.
  std::string ok16 = std::string(16, '[') + "1" + std::string(16, ']');
  EXPECT_EQ(parse("{\"data\":" + ok16 + "}").dim(), 16);
  std::string ok17c = std::string(16, '[') + "[1,2]" + std::string(16, ']');
  EXPECT_EQ(parse("{\"dtype\":\"complex64\",\"data\":" + ok17c + "}").dim(), 16);
}

TEST(JsonTensor, JsonDoubleHelpers) {
  rapidjson::Document d;
  parse_json(R"([1.5, "-inf", true, "x", null])", d, "t");
  EXPECT_EQ(json_to_double(d[0], "a"), 1.5);
  EXPECT_EQ(json_to_double(d[1], "a"), -INFINITY);
  EXPECT_EQ(json_to_double(d[2], "a"), 1.0);
  EXPECT_THROW(json_to_double(d[3], "a"), Error);
  EXPECT_THROW(json_to_double(d[4], "a"), Error);
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartArray();
  write_json_double(w, 0.25);
  write_json_double(w, std::nan(""));
  write_json_double(w, 3.0);
  w.EndArray();
  EXPECT_STREQ(sb.GetString(), "[0.25,\"nan\",3.0]");
}

// ---- base64 ----

TEST(Base64, Rfc4648Vectors) {
  const std::pair<std::string, std::string> cases[] = {{"", ""},
                                                       {"f", "Zg=="},
                                                       {"fo", "Zm8="},
                                                       {"foo", "Zm9v"},
                                                       {"foob", "Zm9vYg=="},
                                                       {"fooba", "Zm9vYmE="},
                                                       {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, enc] : cases) {
    EXPECT_EQ(base64_encode(plain), enc);
    EXPECT_EQ(base64_decode(enc), plain);
    EXPECT_EQ(base64_decoded_size(enc), plain.size());
  }
}

TEST(Base64, RandomRoundTrip) {
  std::mt19937 rng(1);
  for (size_t n = 0; n < 200; ++n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    EXPECT_EQ(base64_decode(base64_encode(s)), s);
  }
}

TEST(Base64, StrictDecoding) {
  for (const char* bad : {"Zg", "Zg=", "Z===", "====", "=Zg=", "Zm9v\n", " Zm9", "Zh==", "Zm9=", "Zm-v", "Zm_v",
                          "Zm8=Zm8=", "Zg==Zg==", "Zm\x80v", "Zm9vY", "Zm9vYg=", "Zm9vY==="}) {
    try {
      base64_decode(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadRequest) << bad;
    }
  }
}

// The vector decoder (32 characters a step, where the CPU has AVX2) and the
// scalar one agree with the encoder at every length and alignment, and every
// byte outside the alphabet is refused at its offset wherever it lands.
TEST(Base64, LongInputsDecodeAndBadBytesAreFoundAtEveryPosition) {
  std::mt19937 rng(2);
  for (size_t n : {size_t{24}, size_t{47}, size_t{48}, size_t{95}, size_t{96}, size_t{97}, size_t{1000}, size_t{4099},
                   size_t{1} << 16}) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    EXPECT_EQ(base64_decode(base64_encode(s)), s) << n;
  }
  std::string plain(150, '\0');
  for (char& c : plain) c = static_cast<char>(rng());
  const std::string good = base64_encode(plain);  // 200 characters, no padding
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const bool alphabet = std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/';
    if (alphabet) continue;
    for (size_t at : {size_t{0}, size_t{5}, size_t{31}, size_t{32}, size_t{63}, size_t{100}, size_t{190}}) {
      std::string t = good;
      t[at] = c;
      try {
        base64_decode(t);
        ADD_FAILURE() << "accepted byte " << b << " at " << at;
      } catch (const Error& e) {
        EXPECT_NE(e.message().find("at offset " + std::to_string(at)), std::string::npos) << e.message();
      }
    }
  }
}

// The encoder (24 bytes a step with AVX2 where the CPU has it) agrees with
// a plain per-group encoding at every length and alignment, for bytes that
// produce every sextet (so every class of the alphabet lookup).
TEST(Base64, EncoderMatchesPlainEncodingAtEveryLengthAndAlignment) {
  static const char kAbc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  auto plain_encode = [](std::string_view in) {
    std::string out;
    for (size_t i = 0; i < in.size(); i += 3) {
      const size_t k = std::min<size_t>(3, in.size() - i);
      uint32_t v = 0;
      for (size_t j = 0; j < 3; ++j) v = v << 8 | (j < k ? static_cast<unsigned char>(in[i + j]) : 0u);
      for (size_t j = 0; j < 4; ++j) out += j <= k ? kAbc[(v >> (18 - 6 * j)) & 63] : '=';
    }
    return out;
  };
  std::mt19937 rng(3);
  std::string pool(4096 + 64, '\0');
  for (char& c : pool) c = static_cast<char>(rng());
  for (int b = 0; b < 256; ++b) pool[static_cast<size_t>(b)] = static_cast<char>(b);  // every byte value
  for (size_t n = 0; n <= 300; ++n) {
    for (size_t at : {size_t{0}, size_t{1}, size_t{7}, size_t{33}}) {
      std::string_view in(pool.data() + at, n);
      ASSERT_EQ(base64_encode(in.data(), in.size()), plain_encode(in)) << n << " at " << at;
    }
  }
  std::string_view big(pool.data() + 5, 4096);
  std::string into(base64_encoded_size(big.size()) + 1, '#');
  base64_encode_into(big.data(), big.size(), into.data());
  EXPECT_EQ(into.back(), '#');  // writes exactly base64_encoded_size characters
  into.pop_back();
  EXPECT_EQ(into, plain_encode(big));
}

}  // namespace
}  // namespace tensord
