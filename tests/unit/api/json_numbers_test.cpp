// numeric_tensor_fast (api/json_numbers.h): a JSON tensor's
// plain-number "data" parsed straight into the tensor gives the tensor the
// DOM path gives, bit for bit, and leaves everything else to the DOM path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api/json_numbers.h"
#include "api/json_tensor.h"
#include "ops/error.h"

namespace tensord {
namespace {

void expect_same_as_dom(const std::string& body) {
  std::optional<Tensor> fast = numeric_tensor_fast(body);
  ASSERT_TRUE(fast.has_value()) << body.substr(0, 200);
  Tensor dom = tensor_from_json_string(body, "body");
  ASSERT_EQ(fast->dtype(), dom.dtype());
  ASSERT_EQ(fast->shape(), dom.shape());
  EXPECT_EQ(std::memcmp(fast->data(), dom.data(), dom.nbytes()), 0) << body.substr(0, 200);
}

TEST(JsonNumbers, FlatAndNestedDataMatchTheDomBitForBit) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-1e6, 1e6);
  for (const char* dtype : {"float32", "float64"}) {
    std::string flat = "[";
    for (int i = 0; i < 600; ++i) {
      char buf[64];
      std::snprintf(buf, sizeof buf, i % 3 == 0 ? "%.17g" : (i % 3 == 1 ? "%.6e" : "%.0f"), u(rng));
      flat += (i ? ", " : "") + std::string(buf);
    }
    flat += "]";
    expect_same_as_dom(std::string("{\"dtype\": \"") + dtype + "\", \"shape\": [600], \"data\": " + flat + "}");
    expect_same_as_dom(std::string("{\"data\": ") + flat + ", \"dtype\": \"" + dtype + "\"}");  // shape read off
    expect_same_as_dom(std::string("{\"name\": \"w\", \"shape\": [20, 30], \"dtype\": \"") + dtype +
                       "\", \"data\": " + flat + "}");  // flat data, rank 2
    expect_same_as_dom(std::string("{\"dtype\": \"") + dtype +
                       "\", \"shape\": [2, 3], \"data\": [[1, -2.5, 3e2], [ -0, 1E-3 ,16777217]]}");
  }
  // Literals that take the integer path, or are too big for it.
  expect_same_as_dom(
      "{\"dtype\": \"float64\", \"data\": [12345678901234567890, -9223372036854775808, -9223372036854775809, "
      "123456789012345678901234567890, 0, -0, 0.1, 1.7976931348623157e+300]}");
  expect_same_as_dom("{\"dtype\": \"float32\", \"data\": [16777217, 16777219, 3.4028235e38, 1e-45]}");
}

// Short decimals take the exact path (a mantissa of at most 2^53 times or
// over a power of ten of at most 22); the rest go to from_chars. Either way
// the DOM path's double, bit for bit, on both sides of every bound.
TEST(JsonNumbers, ShortDecimalsOnEitherSideOfTheExactPathsBounds) {
  std::mt19937_64 rng(12);
  std::string data = "[";
  auto add = [&data](const std::string& lit) { data += (data.size() > 1 ? ", " : "") + lit; };
  for (const char* lit : {"0.5",
                          "-0.0",
                          "0.000",
                          "1.0e0",
                          "0e-400",
                          "0.1",
                          "0.3",
                          "-2.675",
                          "9007199254740992.0",
                          "9007199254740993.0",
                          "9007199254740993e-5",
                          "1e22",
                          "1e23",
                          "1.5e22",
                          "1e-22",
                          "1e-23",
                          "123456789012345678",
                          "1234567890123456789",
                          "999999999999999999",
                          "-999999999999999999",
                          "0.1234567890123456789",
                          "1234567890.1234567890",
                          "4.9e-324",
                          "2.2250738585072014e-308",
                          "1E+2",
                          "1e-0",
                          "100000000000000000000000e-22",
                          "0.0000000000000000000000000001"}) {
    add(lit);
  }
  for (int i = 0; i < 3000; ++i) {
    const uint64_t m = rng() >> (rng() % 64);
    const int e = static_cast<int>(rng() % 61) - 30;
    const int point = static_cast<int>(rng() % 21);
    std::string digits = std::to_string(m);
    if (point > 0 && static_cast<size_t>(point) < digits.size()) digits.insert(digits.size() - point, ".");
    add((i % 2 ? "-" : "") + digits + (i % 3 ? "e" + std::to_string(e) : ""));
  }
  // Long mantissas (the x87 path, api/json_numbers.cpp extended_exact):
  // doubles of every magnitude it takes written with 16 to 19 digits.
  std::uniform_real_distribution<double> unit(1.0, 10.0);
  for (int i = 0; i < 4000; ++i) {
    const double v = unit(rng) * std::pow(10.0, static_cast<int>(rng() % 51) - 25);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*e", 15 + static_cast<int>(rng() % 4), v);
    add(buf);
  }
  // Midpoints between neighbouring doubles above 2^54 are integers of at
  // most 19 digits: written with an exponent, they take the x87 path,
  // which must leave them (and their neighbours) to from_chars's ties.
  for (int i = 0; i < 2000; ++i) {
    const int k = 54 + static_cast<int>(rng() % 9);
    const uint64_t v = (uint64_t{1} << k) + ((rng() >> 12) << (k - 52));  // a double in [2^k, 2^(k+1))
    const uint64_t mid = v + (uint64_t{1} << (k - 53));
    const uint64_t nudge = i % 3 == 0 ? 0 : rng() % 3;
    add(std::to_string(mid - nudge) + "e0");
    add(std::to_string(mid + nudge) + "0e-1");
  }
  // Where the x87 result itself rounds onto a halfway point: m * 10 = mid
  // +- 2 for a midpoint `mid` near 2^66 (the doubles there are 2^14
  // apart, x87's 64-bit mantissa 4 apart), so only the refusal keeps the
  // tie from going the wrong way.
  // mid = 2^13 q, q odd in [2^53, 2^54); m = (mid +- 2) / 10 =
  // (4096 q +- 1) / 5 when that is whole, computed in 64 bits as
  // 4096 (q / 5) + (4096 (q % 5) +- 1) / 5. (Fails without the refusal.)
  for (int found = 0; found < 500;) {
    const uint64_t q = (uint64_t{1} << 53) + (rng() >> 11) * 2 % (uint64_t{1} << 53) + 1;
    for (const int sign : {-1, 1}) {
      const int64_t low = 4096 * static_cast<int64_t>(q % 5) + sign;
      if (low % 5 != 0) continue;
      add(std::to_string(4096 * (q / 5) + static_cast<uint64_t>(low / 5)) + "e1");
      ++found;
    }
  }
  data += "]";
  expect_same_as_dom("{\"dtype\": \"float64\", \"data\": " + data + "}");
  expect_same_as_dom("{\"dtype\": \"float32\", \"data\": " + data + "}");
}

TEST(JsonNumbers, AnythingElseIsLeftToTheDomPath) {
  for (const char* body : {
           "{\"dtype\": \"float32\", \"data\": [1, true]}",                         // a bool
           "{\"dtype\": \"float32\", \"data\": [1, \"nan\"]}",                      // a string
           "{\"dtype\": \"int32\", \"data\": [1, 2]}",                              // another dtype
           "{\"data\": [1, 2]}",                                                    // no dtype
           "{\"datatype\": \"FP32\", \"data\": [1, 2]}",                            // the alias
           "{\"dtype\": \"float32\", \"data\": [1, 2], \"b64\": \"\"}",             // both
           "{\"dtype\": \"float32\", \"data\": [1, 2], \"x\": 1}",                  // an unknown key
           "{\"dtype\": \"float32\", \"dtype\": \"float32\", \"data\": [1]}",       // twice
           "{\"dtype\": \"float32\", \"shape\": [3], \"data\": [1, 2]}",            // too few
           "{\"dtype\": \"float32\", \"shape\": [1], \"data\": [1, 2]}",            // too many
           "{\"dtype\": \"float32\", \"shape\": [2], \"data\": [[1], [2]]}",        // deeper than the shape
           "{\"dtype\": \"float32\", \"shape\": [2, 1, 1], \"data\": [[1], [2]]}",  // shallower
           "{\"dtype\": \"float32\", \"data\": [[1], [2]]}",                        // nested, no shape
           "{\"dtype\": \"float32\", \"shape\": [0], \"data\": []}",                // empty
           "{\"dtype\": \"float32\", \"data\": []}",
           "{\"dtype\": \"float32\", \"data\": [1e400]}",              // overflows
           "{\"dtype\": \"float64\", \"data\": [1e-400]}",             // underflows
           "{\"dtype\": \"float64\", \"data\": [1.5, -0e1010, 0.1]}",  // RapidJSON's "too big" (the fuzzer's)
           "{\"dtype\": \"float32\", \"data\": [01]}",                 // not JSON numbers
           "{\"dtype\": \"float32\", \"data\": [+1]}",
           "{\"dtype\": \"float32\", \"data\": [1.]}",
           "{\"dtype\": \"float32\", \"data\": [.5]}",
           "{\"dtype\": \"float32\", \"data\": [1,]}",
           "{\"dtype\": \"float32\", \"data\": [1 2]}",
           "{\"dtype\": \"float32\", \"data\": [1]} x",         // trailing text
           "{\"dtype\": \"float32\", \"data\": [1]",            // unclosed
           "{\"x\": {\"data\": [1]}, \"dtype\": \"float32\"}",  // not at the top level
           "[{\"dtype\": \"float32\", \"data\": [1]}]",
       }) {
    EXPECT_FALSE(numeric_tensor_fast(body).has_value()) << body;
  }
}

TEST(JsonNumbers, ABodysErrorsAreStillTheDomPaths) {
  // tensor_from_json_body takes the fast path where it can; where it
  // cannot, the message is the one the copying parser gives.
  for (std::string body : {std::string("{\"dtype\": \"float32\", \"shape\": [3], \"data\": [1, 2]}"),
                           std::string("{\"dtype\": \"float32\", \"data\": [1e400]}"),
                           std::string("{\"dtype\": \"float32\", \"data\": [1, 2], \"x\": 1}")}) {
    std::string copy = body, in_place, copying;
    try {
      tensor_from_json_string(body, "body");
    } catch (const Error& e) {
      copying = e.message();
    }
    try {
      tensor_from_json_body(copy, "body");
    } catch (const Error& e) {
      in_place = e.message();
    }
    EXPECT_FALSE(copying.empty()) << body;
    EXPECT_EQ(in_place, copying) << body;
  }
}

}  // namespace
}  // namespace tensord
