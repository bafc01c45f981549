#include "server/request_body.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "ops/error.h"
#include "ops/memory_account.h"
#include "server/body_pool.h"
#include "tests/unit/server/zlib_reference.h"

namespace tensord {
namespace {

using Mode = RequestBody::Mode;

std::string gzipped(const std::string& s) {
  return compressed(s, ContentCoding::kGzip, 9);
}

// Feeds `wire` to the body as the socket would, at most `piece` bytes a read.
void feed(RequestBody& b, const std::string& wire, size_t from, size_t piece) {
  size_t at = from;
  while (!b.done()) {
    const size_t n = std::min({piece, b.room(), wire.size() - at});
    ASSERT_GT(n, 0u) << "the body wants more than the wire has";
    std::memcpy(b.next(), wire.data() + at, n);
    at += n;
    b.commit(n);
  }
  EXPECT_EQ(at, wire.size());
}

struct Fixture {
  std::shared_ptr<BodyPool> pool = std::make_shared<BodyPool>(size_t{64} << 20);
  std::shared_ptr<MemoryAccount> account = std::make_shared<MemoryAccount>("t");
};

TEST(RequestBody, DirectReadsIntoItsStringAndHoldsItsChargeUntilTheRequestEnds) {
  Fixture f;
  std::string wire(size_t{5} << 20, '\0');
  for (size_t i = 0; i < wire.size(); ++i) wire[i] = static_cast<char>(i * 31);
  RequestBody b(Mode::kDirect, wire.size(), f.pool, f.account);
  EXPECT_EQ(b.take_first(std::string_view(wire).substr(0, 1000)), 1000u);
  EXPECT_EQ(b.left(), wire.size() - 1000);
  feed(b, wire, 1000, 256 << 10);
  EXPECT_EQ(b.reads(), (wire.size() - 1000 + (256 << 10) - 1) / (256 << 10));
  EXPECT_EQ(f.account->used(), static_cast<int64_t>(wire.size()));
  RequestBody::Finished done = b.finish();
  EXPECT_EQ(done.body, wire);
  EXPECT_EQ(done.length, wire.size());
  EXPECT_FALSE(done.decoded);
  EXPECT_EQ(f.account->used(), static_cast<int64_t>(wire.size())) << "released before the route used the body";
  done.charge.reset();
  EXPECT_EQ(f.account->used(), 0);
}

TEST(RequestBody, PastTheQuotaIsQuotaExceededWithNothingKeptCharged) {
  Fixture f;
  f.account->set_limit(int64_t{3} << 20);
  const std::string wire(size_t{8} << 20, 'x');
  RequestBody b(Mode::kDirect, wire.size(), f.pool, f.account);
  try {
    feed(b, wire, 0, 1 << 20);
    FAIL() << "an 8 MiB body passed a 3 MiB quota";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kQuotaExceeded);
    EXPECT_NE(e.message().find("an upload counts as its body arrives"), std::string::npos) << e.message();
  }
  EXPECT_EQ(f.account->used(), 0);
  b.drop();  // again, as the session does: nothing released twice
  EXPECT_EQ(f.account->used(), 0);
}

TEST(RequestBody, DroppedHalfWayReleasesItsCharge) {
  Fixture f;
  const std::string wire(size_t{6} << 20, 'y');
  {
    RequestBody b(Mode::kDirect, wire.size(), f.pool, f.account);
    std::memcpy(b.next(), wire.data(), size_t{3} << 20);
    b.commit(size_t{3} << 20);
    EXPECT_EQ(f.account->used(), int64_t{3} << 20);
  }  // the connection went away
  EXPECT_EQ(f.account->used(), 0);
}

TEST(RequestBody, B64DecodesTheValueAsItComes) {
  Fixture f;
  std::string raw(size_t{3} << 20, '\0');
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<char>(i * 7 + 1);
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string b64;
  for (size_t i = 0; i < raw.size(); i += 3) {
    const uint32_t v = (uint8_t(raw[i]) << 16) | (uint8_t(raw[i + 1]) << 8) | uint8_t(raw[i + 2]);
    for (int s = 18; s >= 0; s -= 6) b64 += kAlphabet[(v >> s) & 63];
  }
  const std::string wire = R"({"dtype":"uint8","shape":[)" + std::to_string(raw.size()) + R"(],"b64":")" + b64 + "\"}";
  RequestBody b(Mode::kB64, wire.size(), f.pool, f.account);
  const size_t took = b.take_first(std::string_view(wire).substr(0, 40));
  feed(b, wire, took, 100'000);
  RequestBody::Finished done = b.finish();
  ASSERT_TRUE(done.decoded);
  EXPECT_EQ(done.decoded->bytes.substr(done.decoded->offset, done.decoded->size), raw);
  EXPECT_EQ(done.length, wire.size());
  EXPECT_EQ(f.account->used(), static_cast<int64_t>(raw.size())) << "a b64 body is charged what it decoded to";
}

TEST(RequestBody, InflateHandsOverTheInflatedBodyAndChargesIt) {
  Fixture f;
  const std::string plain(size_t{2} << 20, 'z');
  const std::string wire = gzipped(plain);
  RequestBody b(Mode::kInflate, wire.size(), f.pool, f.account, ContentCoding::kGzip, size_t{64} << 20);
  feed(b, wire, b.take_first(std::string_view(wire).substr(0, 10)), 100);
  RequestBody::Finished done = b.finish();
  EXPECT_EQ(done.body, plain);
  EXPECT_EQ(f.account->used(), static_cast<int64_t>(plain.size()));
}

TEST(RequestBody, ABombStopsAtTheLimitAndACompressedQuotaSaysSo) {
  Fixture f;
  const std::string wire = gzipped(std::string(size_t{64} << 20, '\0'));
  {
    RequestBody b(Mode::kInflate, wire.size(), f.pool, f.account, ContentCoding::kGzip, size_t{1} << 20);
    try {
      feed(b, wire, 0, 64 << 10);
      FAIL() << "a 64 MiB bomb passed a 1 MiB limit";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kPayloadTooLarge);
    }
    EXPECT_EQ(f.account->used(), 0);
  }
  f.account->set_limit(int64_t{1} << 20);
  RequestBody b(Mode::kInflate, wire.size(), f.pool, f.account, ContentCoding::kGzip, size_t{1} << 30);
  try {
    feed(b, wire, 0, 64 << 10);
    FAIL() << "64 MiB inflated past a 1 MiB quota";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kQuotaExceeded);
    EXPECT_NE(e.message().find("a compressed body counts as it inflates"), std::string::npos) << e.message();
  }
  EXPECT_EQ(f.account->used(), 0);
}

TEST(RequestBody, BytesNotInTheirCodingAreBadRequest) {
  Fixture f;
  const std::string wire(1000, 'n');
  RequestBody b(Mode::kInflate, wire.size(), f.pool, f.account, ContentCoding::kGzip, size_t{1} << 20);
  try {
    feed(b, wire, 0, 100);
    b.finish();
    FAIL() << "plain bytes inflated as gzip";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
  }
  EXPECT_EQ(f.account->used(), 0);
}

TEST(RequestBody, ThePaceMarkFollowsTheLastReadAndStaysWithinWhatIsLeft) {
  Fixture f;
  const size_t len = size_t{8} << 20;
  RequestBody b(Mode::kDirect, len, f.pool, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const auto pace = std::chrono::microseconds(100'000);
  EXPECT_EQ(b.pace_mark(t0, pace, 256 << 10), 1) << "a body's first read wakes at its first byte";
  b.commit(1000);  // 1000 bytes in 10 ms: 10,000 in the pace's 100 ms
  EXPECT_EQ(b.pace_mark(t0 + std::chrono::milliseconds(10), pace, 256 << 10), 10'000);
  b.commit(len - 1000 - 300);
  EXPECT_EQ(b.pace_mark(t0 + std::chrono::milliseconds(11), pace, 256 << 10), 300) << "past what is left";
}

}  // namespace
}  // namespace tensord
