#include "server/response_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "server/beast.h"

namespace tensord {
namespace {

// Drains the writer as a socket would that takes at most `take` bytes a
// call (the iovec count capped at `max_iov`), and returns the bytes.
std::string drain(ResponseWriter& w, size_t take, size_t max_iov = 8) {
  std::string wire;
  std::vector<iovec> iov(max_iov);
  for (int guard = 0; guard < 1'000'000; ++guard) {
    const size_t n = w.next(iov.data(), iov.size());
    if (n == 0) {
      EXPECT_TRUE(w.done());
      return wire;
    }
    EXPECT_LE(n, max_iov);
    size_t left = take;
    for (size_t i = 0; i < n && left > 0; ++i) {
      const size_t k = std::min(left, iov[i].iov_len);
      EXPECT_GT(iov[i].iov_len, 0u) << "an empty buffer handed out";
      wire.append(static_cast<const char*>(iov[i].iov_base), k);
      left -= k;
    }
    w.consume(take - left);
  }
  ADD_FAILURE() << "the writer never finished";
  return wire;
}

// What Beast's own parser reads from the bytes.
http::response<http::string_body> parse(const std::string& wire, bool head_only = false) {
  http::response_parser<http::string_body> p;
  p.skip(head_only);
  p.eager(true);
  beast::error_code ec;
  size_t used = p.put(net::buffer(wire), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(p.is_done());
  EXPECT_EQ(used, wire.size()) << "bytes after the message";
  return p.release();
}

// A view of `s` that keeps it alive, and one made by fill() as it is sent.
BodyView plain_view(const std::shared_ptr<const std::string>& s) {
  return BodyView{s->data(), s->size(), s, {}};
}
BodyView fill_view(const std::shared_ptr<const std::string>& s) {
  BodyView v;
  v.size = s->size();
  v.owner = s;
  v.fill = [s](size_t at, char* out, size_t n) {
    EXPECT_EQ(at % BodyView::kFillAlign, 0u);
    EXPECT_LE(at + n, s->size());
    std::copy_n(s->data() + at, n, out);
  };
  return v;
}

std::string pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7 % 61);
  return s;
}

TEST(ResponseWriterTest, HeadAndBodyParseBackWhateverTheSocketTakes) {
  auto a = std::make_shared<const std::string>(pattern(1000, 'a'));
  auto b = std::make_shared<const std::string>(pattern(ResponseWriter::kScratchBytes * 2 + 12, 'b'));  // 3 pieces
  auto c = std::make_shared<const std::string>(pattern(5, 'c'));
  const std::string expect = "{\"head\":1}" + *a + *b + *c + *a;
  for (size_t take : {size_t{1} << 30, size_t{65536}, size_t{4097}, size_t{7}}) {
    ResponseWriter w;
    w.begin(11, 200, "OK");
    w.field("Server", "tensord");
    w.field("X-Thing", "a b");
    w.field("Content-Type", "application/octet-stream");
    w.content_length(expect.size());
    w.end_head(true);
    w.body("{\"head\":1}", {plain_view(a), fill_view(b), plain_view(c), plain_view(a)});
    const std::string wire = drain(w, take);
    auto msg = parse(wire);
    EXPECT_EQ(msg.result_int(), 200u);
    EXPECT_EQ(msg.version(), 11u);
    EXPECT_EQ(msg["Server"], "tensord");
    EXPECT_EQ(msg["X-Thing"], "a b");
    EXPECT_TRUE(msg.keep_alive());
    EXPECT_EQ(msg.body().size(), expect.size()) << "take " << take;
    EXPECT_TRUE(msg.body() == expect) << "take " << take;
  }
}

TEST(ResponseWriterTest, SmallPiecesAndFewBuffersStillCarryEveryByte) {
  auto a = std::make_shared<const std::string>(pattern(33, 'x'));
  auto f = std::make_shared<const std::string>(pattern(70, 'y'));
  const std::string expect = "B" + *a + *f + *a + *f;
  for (size_t take : {size_t{1}, size_t{3}, size_t{64}}) {
    for (size_t max_iov : {size_t{1}, size_t{2}, size_t{64}}) {
      ResponseWriter w;
      w.begin(11, 201, "Created");
      w.content_length(expect.size());
      w.end_head(true);
      w.body("B", {plain_view(a), fill_view(f), BodyView{}, plain_view(a), fill_view(f)});
      auto msg = parse(drain(w, take, max_iov));
      EXPECT_EQ(msg.result_int(), 201u);
      EXPECT_EQ(msg.body(), expect) << "take " << take << " iov " << max_iov;
    }
  }
}

TEST(ResponseWriterTest, ConnectionHeaderFollowsTheVersion) {
  struct Case {
    unsigned version;
    bool keep_alive;
    const char* field;  // the Connection field expected, "" for none
  };
  for (const Case& k :
       {Case{11, true, ""}, Case{11, false, "close"}, Case{10, true, "keep-alive"}, Case{10, false, ""}}) {
    ResponseWriter w;
    w.begin(k.version, 404, "Not Found");
    w.content_length(2);
    w.end_head(k.keep_alive);
    w.body("{}", {});
    const std::string wire = drain(w, 1 << 20);
    EXPECT_EQ(wire.rfind(k.version == 10 ? "HTTP/1.0 404 Not Found\r\n" : "HTTP/1.1 404 Not Found\r\n", 0), 0u);
    auto msg = parse(wire);
    EXPECT_EQ(msg[http::field::connection], k.field);
    EXPECT_EQ(msg.keep_alive(), k.keep_alive) << k.version;
  }
}

TEST(ResponseWriterTest, NoBodyAndHeadOnlyAnswers) {
  ResponseWriter w;
  w.begin(11, 204, "No Content");
  w.field("X-Request-Id", "r1");
  w.end_head(true);
  const std::string wire = drain(w, 1 << 20);
  EXPECT_EQ(wire, "HTTP/1.1 204 No Content\r\nX-Request-Id: r1\r\n\r\n");
  EXPECT_EQ(parse(wire).result_int(), 204u);

  // HEAD: the length a GET would carry, no bytes after the head.
  w.clear();
  w.begin(11, 200, "OK");
  w.content_length(12345);
  w.end_head(true);
  const std::string head = drain(w, 1 << 20);
  EXPECT_EQ(head, "HTTP/1.1 200 OK\r\nContent-Length: 12345\r\n\r\n");
  EXPECT_EQ(parse(head, true)[http::field::content_length], "12345");
}

TEST(ResponseWriterTest, ClearLetsTheViewsGoAndTheNextResponseStartsClean) {
  auto owner = std::make_shared<const std::string>(pattern(100, 'o'));
  std::weak_ptr<const std::string> watch = owner;
  ResponseWriter w;
  w.begin(11, 200, "OK");
  w.content_length(100);
  w.end_head(true);
  w.body("", {plain_view(owner), fill_view(owner)});
  owner.reset();
  EXPECT_FALSE(watch.expired()) << "the response holds its views";
  iovec iov[4];
  ASSERT_GT(w.next(iov, 4), 0u);
  w.consume(10);  // the connection fails part way
  w.clear();
  EXPECT_TRUE(watch.expired()) << "clear() dropped the views' owners";

  w.begin(11, 200, "OK");
  w.content_length(2);
  w.end_head(false);
  w.body("ok", {});
  auto msg = parse(drain(w, 5));
  EXPECT_EQ(msg.body(), "ok");
  EXPECT_FALSE(msg.keep_alive());
}

}  // namespace
}  // namespace tensord
