#include "server/content_coding.h"

#include <gtest/gtest.h>

#include <random>

#include "ops/error.h"
#include "server/stream_inflater.h"
#include "tests/unit/server/zlib_reference.h"

namespace tensord {
namespace {

std::string inflated_ref(const std::string& s, ContentCoding c) {
  return inflate_body(s, c, size_t{1} << 30, {});
}

std::string random_text(size_t n) {
  std::mt19937 rng(7);
  std::string s(n, '\0');
  for (char& ch : s) ch = static_cast<char>('a' + rng() % 8);
  return s;
}

TEST(ContentCoding, RequestCodings) {
  EXPECT_FALSE(request_coding(""));
  EXPECT_FALSE(request_coding("identity"));
  EXPECT_EQ(request_coding("gzip"), ContentCoding::kGzip);
  EXPECT_EQ(request_coding(" GZIP "), ContentCoding::kGzip);
  EXPECT_EQ(request_coding("x-gzip"), ContentCoding::kGzip);
  EXPECT_EQ(request_coding("deflate"), ContentCoding::kDeflate);
  for (const char* bad : {"br", "gzip, deflate", "zstd", "compress"}) {
    try {
      request_coding(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
    }
  }
}

TEST(ContentCoding, AcceptEncoding) {
  EXPECT_FALSE(accepted_coding(""));
  EXPECT_FALSE(accepted_coding("identity"));
  EXPECT_FALSE(accepted_coding("br, zstd"));
  EXPECT_EQ(accepted_coding("gzip"), ContentCoding::kGzip);
  EXPECT_EQ(accepted_coding("deflate"), ContentCoding::kDeflate);
  EXPECT_EQ(accepted_coding("deflate, gzip"), ContentCoding::kGzip);
  EXPECT_EQ(accepted_coding("gzip;q=0, deflate"), ContentCoding::kDeflate);
  EXPECT_EQ(accepted_coding("gzip;q=0.5"), ContentCoding::kGzip);
  EXPECT_FALSE(accepted_coding("gzip; q=0.0, deflate;q=0"));
}

TEST(ContentCoding, InflatesWhatZlibWrites) {
  for (ContentCoding c : {ContentCoding::kGzip, ContentCoding::kDeflate}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{3} << 20}) {
      const std::string s = random_text(n);
      EXPECT_EQ(inflated_ref(compressed(s, c), c), s) << n;
    }
  }
}

TEST(ContentCoding, GzipMembersOneAfterAnother) {
  const std::string a = random_text(5000), b = random_text(7000);
  const std::string two = compressed(a, ContentCoding::kGzip) + compressed(b, ContentCoding::kGzip);
  EXPECT_EQ(inflated_ref(two, ContentCoding::kGzip), a + b);
}

TEST(ContentCoding, ReportsGrowthAndStopsAtTheLimit) {
  const std::string zeros(size_t{8} << 20, '\0');
  const std::string z = compressed(zeros, ContentCoding::kGzip);  // ~8 KiB: a small bomb
  std::vector<size_t> seen;
  std::string out = inflate_body(z, ContentCoding::kGzip, size_t{16} << 20, [&](size_t t) { seen.push_back(t); });
  EXPECT_EQ(out.size(), zeros.size());
  ASSERT_GE(seen.size(), 8u);  // a step per MiB
  EXPECT_EQ(seen.back(), zeros.size());
  for (size_t i = 1; i + 1 < seen.size(); ++i) {  // each step charged ahead, at most a MiB
    EXPECT_GE(seen[i], seen[i - 1]);
    EXPECT_LE(seen[i] - seen[i - 1], size_t{1} << 20);
  }
  // Smaller steps: more of them, the last one the whole size.
  size_t calls = 0, charged = 0;
  inflate_body(
      z, ContentCoding::kGzip, size_t{16} << 20,
      [&](size_t t) {
        ++calls;
        charged = t;
      },
      size_t{64} << 10);
  EXPECT_GE(calls, 128u);
  EXPECT_EQ(charged, zeros.size());
  try {
    inflate_body(z, ContentCoding::kGzip, size_t{1} << 20, {});
    ADD_FAILURE() << "inflated past the limit";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kPayloadTooLarge);
  }
  // What the callback throws (the tenant's quota) stops it.
  EXPECT_THROW(inflate_body(z, ContentCoding::kGzip, size_t{16} << 20,
                            [](size_t t) {
                              if (t > (size_t{2} << 20)) throw Error(ErrorCode::kQuotaExceeded, "quota");
                            }),
               Error);
}

TEST(ContentCoding, MalformedBodiesAreBadRequests) {
  const std::string s = random_text(100000);
  const std::string gz = compressed(s, ContentCoding::kGzip);
  const std::string zl = compressed(s, ContentCoding::kDeflate);
  for (const auto& [body, c] : std::vector<std::pair<std::string, ContentCoding>>{
           {"plainly not gzip", ContentCoding::kGzip},
           {gz.substr(0, gz.size() / 2), ContentCoding::kGzip},  // truncated
           {gz + "trailing", ContentCoding::kGzip},
           {zl + zl, ContentCoding::kDeflate},  // zlib's format is one stream
           {gz, ContentCoding::kDeflate},       // the other framing
           {zl, ContentCoding::kGzip},
           {"", ContentCoding::kDeflate},
       }) {
    try {
      inflate_body(body, c, size_t{1} << 30, {});
      ADD_FAILURE() << "accepted a malformed body of " << body.size() << " bytes";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadRequest) << e.message();
    }
  }
}

TEST(ContentCoding, CompressesBodyAndViews) {
  const std::string head = "{\"outputs\":[]}";
  const std::string bytes = random_text(300000);
  auto owner = std::make_shared<std::string>(bytes);
  for (ContentCoding c : {ContentCoding::kGzip, ContentCoding::kDeflate}) {
    HttpResponse r;
    r.body = head;
    r.views.push_back(BodyView{owner->data(), owner->size(), owner, {}});
    // A view made as it is sent (base64 text): filled in aligned pieces.
    r.views.push_back(BodyView{nullptr, 4096, nullptr, [](size_t at, char* out, size_t n) {
                                 for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>('A' + (at + i) % 26);
                               }});
    compress_response(r, c);
    EXPECT_TRUE(r.views.empty());
    std::string expect = head + bytes;
    for (size_t i = 0; i < 4096; ++i) expect += static_cast<char>('A' + i % 26);
    EXPECT_EQ(inflated_ref(r.body, c), expect);
    bool has_ce = false;
    for (const auto& [k, v] : r.headers)
      has_ce |= k == "Content-Encoding" && v == (c == ContentCoding::kGzip ? "gzip" : "deflate");
    EXPECT_TRUE(has_ce);
  }
  HttpResponse empty;
  empty.body.clear();
  compress_response(empty, ContentCoding::kGzip);
  EXPECT_TRUE(empty.headers.empty());
}

// The session's path (BodyKind::kInflated): the body fed as it arrives, in
// whatever pieces the socket gives.
std::string inflated_in_pieces(const std::string& z, ContentCoding c, size_t piece) {
  StreamInflater inf(c, size_t{1} << 30, 0, {});
  for (size_t at = 0; at < z.size(); at += piece) inf.feed(std::string_view(z).substr(at, piece));
  inf.feed({});  // an empty read changes nothing
  return inf.finish();
}

TEST(StreamInflater, AnyPiecesInflateAsTheWholeDoes) {
  const std::string a = random_text(300000), b = random_text(70000);
  for (ContentCoding c : {ContentCoding::kGzip, ContentCoding::kDeflate}) {
    const std::string z = compressed(a, c);
    for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, size_t{65536}, z.size()}) {
      EXPECT_EQ(inflated_in_pieces(z, c, piece), a) << piece;
    }
  }
  // gzip members, the boundary inside a piece or between two.
  const std::string za = compressed(a, ContentCoding::kGzip);
  const std::string two = za + compressed(b, ContentCoding::kGzip);
  for (size_t piece : {size_t{3}, za.size(), size_t{10000}}) {
    EXPECT_EQ(inflated_in_pieces(two, ContentCoding::kGzip, piece), a + b) << piece;
  }
}

TEST(StreamInflater, ABombStopsAtTheLimitWithTheRestUnread) {
  const std::string z = compressed(std::string(size_t{64} << 20, '\0'), ContentCoding::kGzip);  // ~64 KiB
  const size_t limit = size_t{2} << 20;
  size_t most = 0;
  StreamInflater inf(ContentCoding::kGzip, limit, z.size() * 4, [&](size_t t) { most = std::max(most, t); });
  size_t fed = 0;
  try {
    for (; fed < z.size(); fed += 4096) inf.feed(std::string_view(z).substr(fed, 4096));
    ADD_FAILURE() << "inflated past the limit";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kPayloadTooLarge) << e.message();
  }
  EXPECT_LT(fed, z.size() / 8);  // stopped within the first few pieces
  EXPECT_LE(most, limit);        // never announced (so never charged) past the limit
}

TEST(StreamInflater, WhatOnGrowThrowsStopsIt) {
  const std::string z = compressed(std::string(size_t{16} << 20, ' '), ContentCoding::kDeflate);
  size_t charged = 0;
  StreamInflater inf(ContentCoding::kDeflate, size_t{1} << 30, 0, [&](size_t t) {
    if (t > (size_t{2} << 20)) throw Error(ErrorCode::kQuotaExceeded, "quota");
    charged = t;
  });
  EXPECT_THROW(inf.feed(z), Error);
  EXPECT_LE(charged, size_t{2} << 20);
  EXPECT_LE(inf.size(), charged);  // nothing written past what was charged
}

TEST(StreamInflater, CutShortOrTrailingBytesAreBadRequests) {
  const std::string s = random_text(50000);
  for (ContentCoding c : {ContentCoding::kGzip, ContentCoding::kDeflate}) {
    const std::string z = compressed(s, c);
    for (size_t cut : {size_t{0}, size_t{5}, z.size() / 2, z.size() - 1}) {
      StreamInflater inf(c, size_t{1} << 30, 0, {});
      inf.feed(std::string_view(z).substr(0, cut));
      try {
        inf.finish();
        ADD_FAILURE() << "finished a body cut at " << cut;
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kBadRequest) << e.message();
      }
    }
  }
  // Bytes after a zlib stream, in a later piece; garbage after a gzip member.
  for (ContentCoding c : {ContentCoding::kGzip, ContentCoding::kDeflate}) {
    StreamInflater inf(c, size_t{1} << 30, 0, {});
    inf.feed(compressed(s, c));
    EXPECT_THROW(inf.feed("trailing bytes"), Error);
  }
}

}  // namespace
}  // namespace tensord
