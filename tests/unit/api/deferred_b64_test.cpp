// DeferredB64 (api/deferred_b64.h): a JSON answer's large b64
// values are left out of the writer's buffer and encoded a piece at a time
// as the body is sent; the pieces put together are the text the writer
// would have written.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api/deferred_b64.h"
#include "api/json_tensor.h"
#include "api/program_json.h"

namespace tensord {
namespace {

Tensor bytes_tensor(size_t n, uint8_t seed) {
  Tensor t = Tensor::empty_host(DType::kUInt8, {static_cast<int64_t>(n)});
  auto* p = static_cast<uint8_t*>(t.data());
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(i * 131 + seed);
  return t;
}

// The body as the session sends it: plain views as they are, filled ones
// in pieces of `piece` characters (a multiple of 4; the last one shorter).
std::string assemble(const std::vector<BodyView>& views, size_t piece, int* filled = nullptr) {
  std::string out;
  for (const auto& v : views) {
    if (!v.fill) {
      out.append(static_cast<const char*>(v.data), v.size);
      continue;
    }
    if (filled) ++*filled;
    for (size_t at = 0; at < v.size; at += piece) {
      const size_t k = std::min(piece, v.size - at);
      std::string buf(k, '\0');
      v.fill(at, buf.data(), k);
      out += buf;
    }
  }
  return out;
}

TEST(DeferredB64, ALargeValueIsEncodedAsItIsSent) {
  for (size_t n : {DeferredB64::kMinBytes, DeferredB64::kMinBytes + 1, DeferredB64::kMinBytes + 2, size_t{3} << 20}) {
    Tensor t = bytes_tensor(n, static_cast<uint8_t>(n));
    const std::string whole = tensor_to_json_string(t, true);
    auto views = tensor_to_json_body(t, true);
    for (size_t piece : {size_t{4}, size_t{4096}, size_t{512} << 10}) {
      if (piece == 4 && n > DeferredB64::kMinBytes) continue;  // slow; the small size shows the arithmetic
      int filled = 0;
      EXPECT_EQ(assemble(views, piece, &filled), whole) << n << " bytes in pieces of " << piece;
      EXPECT_EQ(filled, 1);
    }
    size_t total = 0;
    for (const auto& v : views) total += v.size;
    EXPECT_EQ(total, whole.size()) << "Content-Length would be off";
  }
}

TEST(DeferredB64, ASmallValueStaysInTheText) {
  Tensor t = bytes_tensor(DeferredB64::kMinBytes - 1, 1);
  auto views = tensor_to_json_body(t, true);
  ASSERT_EQ(views.size(), 1u);
  EXPECT_FALSE(views[0].fill);
  EXPECT_EQ(assemble(views, 4096), tensor_to_json_string(t, true));
  // Numeric JSON is never deferred.
  Tensor big = bytes_tensor(DeferredB64::kMinBytes, 2);
  auto data_views = tensor_to_json_body(big, false);
  ASSERT_EQ(data_views.size(), 1u);
  EXPECT_FALSE(data_views[0].fill);
}

TEST(DeferredB64, OutsideAScopeWritersEncodeInline) {
  EXPECT_EQ(DeferredB64::current(), nullptr);
  {
    DeferredB64 outer;
    EXPECT_EQ(DeferredB64::current(), &outer);
    {
      DeferredB64 inner;
      EXPECT_EQ(DeferredB64::current(), &inner);
    }
    EXPECT_EQ(DeferredB64::current(), &outer);
  }
  EXPECT_EQ(DeferredB64::current(), nullptr);
  Tensor t = bytes_tensor(DeferredB64::kMinBytes, 3);
  const std::string s = tensor_to_json_string(t, true);
  EXPECT_GT(s.size(), DeferredB64::kMinBytes * 4 / 3);
}

TEST(DeferredB64, TheViewKeepsItsTensorAlive) {
  std::vector<BodyView> views;
  std::string whole;
  {
    Tensor t = bytes_tensor(size_t{2} << 20, 4);
    whole = tensor_to_json_string(t, true);
    views = tensor_to_json_body(t, true);
  }
  EXPECT_EQ(assemble(views, size_t{512} << 10), whole);
}

}  // namespace
}  // namespace tensord
