// Starts HttpServer on an ephemeral port and talks to it over real TCP with a
// plain Beast client.
#include "server/http_server.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include "metrics/metrics.h"
#include "ops/error.h"
#include "server/router.h"

namespace tensord {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using Response = http::response<http::string_body>;

std::string field(const Response& r, const std::string& name) {
  auto it = r.find(name);
  return it == r.end() ? std::string() : std::string(it->value());
}

// One client connection: raw bytes out, parsed responses in.
class Client {
 public:
  explicit Client(uint16_t port) : socket_(ioc_) {
    socket_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  }

  void send(const std::string& raw) { net::write(socket_, net::buffer(raw)); }

  Response read(bool head = false) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);
    parser.skip(head);
    http::read(socket_, buffer_, parser);
    return parser.release();
  }

  Response request(const std::string& method, const std::string& target, const std::string& extra_headers = "",
                   const std::string& body = "") {
    std::string raw = method + " " + target + " HTTP/1.1\r\nHost: test\r\n" + extra_headers;
    if (!body.empty() || method == "POST" || method == "PUT") {
      raw += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    }
    raw += "\r\n" + body;
    send(raw);
    return read(method == "HEAD");
  }

  // True when the server closed the connection (EOF, or reset) within `wait`.
  bool closed_by_peer() {
    boost::system::error_code ec;
    if (buffer_.size() > 0) return false;
    char c;
    size_t n = socket_.read_some(net::buffer(&c, 1), ec);
    return n == 0 && (ec == net::error::eof || ec == net::error::connection_reset);
  }

 private:
  net::io_context ioc_;
  tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

HttpResponse text(std::string body) {
  HttpResponse r;
  r.content_type = "text/plain";
  r.body = std::move(body);
  return r;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto router = std::make_shared<Router>();
    router->add("GET", "/hello", [](HttpRequest&) { return text("hello"); });
    router->add("GET", "/echo/{rest...}", [](HttpRequest& req) {
      std::string out = req.path + "|" + req.params.at("rest");
      for (const auto& [k, v] : req.query) out += "|" + k + "=" + v;
      out += "|ua=" + req.header("user-agent");
      return text(out);
    });
    router->add("POST", "/body",
                [](HttpRequest& req) { return text(std::to_string(req.body.size()) + ":" + req.body.substr(0, 16)); });
    router->add("GET", "/error", [](HttpRequest&) -> HttpResponse {
      throw Error(ErrorCode::kShapeMismatch, "add: shapes [2] and [3]", "n3");
    });
    router->add("GET", "/busy", [](HttpRequest&) -> HttpResponse { throw Error(ErrorCode::kQueueFull, "queue full"); });
    router->add("GET", "/crash", [](HttpRequest&) -> HttpResponse { throw std::runtime_error("boom"); });
    router->add("GET", "/int", [](HttpRequest&) -> HttpResponse { throw 42; });
    router->add("GET", "/empty", [](HttpRequest&) {
      HttpResponse r;
      r.status = 204;
      return r;
    });
    router->add("GET", "/slow", [this](HttpRequest&) {
      slow_started = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
      return text("slow done");
    });
    router->add_offloaded("GET", "/blocking", [this](HttpRequest&) {
      blocking_started = true;
      std::unique_lock<std::mutex> lk(release_mu);
      release_cv.wait_for(lk, std::chrono::seconds(10), [this] { return released; });
      return text("released");
    });
    ServerOptions opts;
    opts.host = "127.0.0.1";
    opts.port = 0;
    opts.max_body_bytes = 1024;
    opts.io_threads = 2;
    opts.header_timeout = std::chrono::seconds(1);
    opts.idle_timeout = std::chrono::seconds(2);
    opts.drain_timeout = std::chrono::seconds(5);
    server = std::make_unique<HttpServer>(opts, std::move(router));
    server->set_on_drain([this] { drain_calls++; });
    thread = std::thread([this] { server->run(); });
  }

  void TearDown() override {
    server->request_stop();
    thread.join();
  }

  uint16_t port() const { return server->port(); }

  std::unique_ptr<HttpServer> server;
  std::thread thread;
  std::atomic<int> drain_calls{0};
  std::atomic<bool> slow_started{false};
  int slow_ms = 300;
  std::atomic<bool> blocking_started{false};
  std::mutex release_mu;
  std::condition_variable release_cv;
  bool released = false;
  void release() {
    {
      std::lock_guard<std::mutex> lk(release_mu);
      released = true;
    }
    release_cv.notify_all();
  }
};

TEST_F(HttpServerTest, OffloadedHandlersDoNotHoldIoThreads) {
  // Four blocked handlers on a server with two io threads: inline routes
  // must still answer, and the blocked ones finish once released.
  std::vector<std::unique_ptr<Client>> blocked;
  for (int i = 0; i < 4; ++i) {
    blocked.push_back(std::make_unique<Client>(port()));
    blocked.back()->send("GET /blocking HTTP/1.1\r\nHost: t\r\n\r\n");
  }
  for (int i = 0; i < 200 && !blocking_started; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(blocking_started);
  Client c(port());
  Response r = c.request("GET", "/hello");
  EXPECT_EQ(r.body(), "hello");
  EXPECT_GE(server->inflight(), 4u);
  release();
  for (auto& b : blocked) {
    Response br = b->read();
    EXPECT_EQ(br.result_int(), 200);
    EXPECT_EQ(br.body(), "released");
    EXPECT_TRUE(br.keep_alive());
  }
}

TEST_F(HttpServerTest, BindsEphemeralPort) {
  EXPECT_NE(port(), 0);
}

TEST_F(HttpServerTest, KeepAliveServesTwoRequestsOnOneConnection) {
  Client c(port());
  Response r1 = c.request("GET", "/hello");
  EXPECT_EQ(r1.result_int(), 200);
  EXPECT_EQ(r1.body(), "hello");
  EXPECT_TRUE(r1.keep_alive());
  EXPECT_EQ(field(r1, "Server"), "tensord");
  EXPECT_EQ(field(r1, "Content-Length"), "5");
  EXPECT_EQ(field(r1, "Content-Type"), "text/plain");
  Response r2 = c.request("GET", "/hello");
  EXPECT_EQ(r2.result_int(), 200);
  EXPECT_EQ(r2.body(), "hello");
}

TEST_F(HttpServerTest, PipelinedRequests) {
  Client c(port());
  c.send("GET /hello HTTP/1.1\r\nHost: t\r\n\r\nGET /echo/x HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_EQ(c.read().body(), "hello");
  EXPECT_EQ(c.read().body(), "/echo/x|x|ua=");
}

TEST_F(HttpServerTest, ConnectionCloseIsHonoured) {
  Client c(port());
  Response r = c.request("GET", "/hello", "Connection: close\r\n");
  EXPECT_EQ(r.result_int(), 200);
  EXPECT_FALSE(r.keep_alive());
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(HttpServerTest, Http10ClosesByDefault) {
  Client c(port());
  c.send("GET /hello HTTP/1.0\r\n\r\n");
  Response r = c.read();
  EXPECT_EQ(r.version(), 10u);
  EXPECT_EQ(r.body(), "hello");
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(HttpServerTest, RequestIdEchoedOrGenerated) {
  Client c(port());
  Response r = c.request("GET", "/hello", "X-Request-Id: my-id.42\r\n");
  EXPECT_EQ(field(r, "X-Request-Id"), "my-id.42");

  r = c.request("GET", "/hello");
  std::string id = field(r, "X-Request-Id");
  ASSERT_EQ(id.size(), 16u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  r = c.request("GET", "/hello");
  EXPECT_NE(field(r, "X-Request-Id"), id);

  // Too long: replaced by a generated one.
  r = c.request("GET", "/hello", "X-Request-Id: " + std::string(200, 'a') + "\r\n");
  EXPECT_EQ(field(r, "X-Request-Id").size(), 16u);
}

TEST_F(HttpServerTest, PathAndQueryAreDecoded) {
  Client c(port());
  Response r = c.request("GET", "/echo/a%2Fb/c%20d?prefix=p%2F&x=1+2", "User-Agent: UT\r\n");
  EXPECT_EQ(r.result_int(), 200);
  EXPECT_EQ(r.body(), "/echo/a/b/c d|a/b/c d|prefix=p/|x=1 2|ua=UT");
}

TEST_F(HttpServerTest, BadPercentEscapeIs400) {
  Client c(port());
  for (const char* target : {"/echo/a%zz", "/echo/a%00"}) {
    Response r = c.request("GET", target);
    EXPECT_EQ(r.result_int(), 400) << target;
    EXPECT_NE(r.body().find("\"code\":\"bad_request\""), std::string::npos) << r.body();
  }
}

TEST_F(HttpServerTest, BadQueryEscapeIs400) {
  // The route is matched after the whole target parsed: a bad escape in
  // the query is the request's fault, not a handler's input.
  Client c(port());
  for (const char* target : {"/echo/a?x=%zz", "/echo/a?x=%00", "/blocking?x=%g1"}) {
    Response r = c.request("GET", target);
    EXPECT_EQ(r.result_int(), 400) << target;
    EXPECT_NE(r.body().find("\"code\":\"bad_request\""), std::string::npos) << r.body();
  }
  EXPECT_FALSE(blocking_started) << "no handler ran";
}

TEST_F(HttpServerTest, BodyIsDelivered) {
  Client c(port());
  Response r = c.request("POST", "/body", "", std::string(1024, 'x'));
  EXPECT_EQ(r.result_int(), 200);
  EXPECT_EQ(r.body(), "1024:" + std::string(16, 'x'));
}

TEST_F(HttpServerTest, ChunkedBodyIsDelivered) {
  Client c(port());
  c.send(
      "POST /body HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  Response r = c.read();
  EXPECT_EQ(r.result_int(), 200);
  EXPECT_EQ(r.body(), "11:hello world");
}

TEST_F(HttpServerTest, BodyOverLimitIs413) {
  Client c(port());
  Response r = c.request("POST", "/body", "X-Request-Id: big-1\r\n", std::string(2000, 'x'));
  EXPECT_EQ(r.result_int(), 413);
  EXPECT_NE(r.body().find("\"code\":\"payload_too_large\""), std::string::npos) << r.body();
  EXPECT_NE(r.body().find("\"request_id\":\"big-1\""), std::string::npos) << r.body();
  EXPECT_EQ(field(r, "X-Request-Id"), "big-1");
  EXPECT_FALSE(r.keep_alive());
}

TEST_F(HttpServerTest, ChunkedBodyOverLimitIs413) {
  Client c(port());
  std::string chunk(600, 'y');
  c.send(
      "POST /body HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "258\r\n" +
      chunk + "\r\n258\r\n" + chunk + "\r\n0\r\n\r\n");
  Response r = c.read();
  EXPECT_EQ(r.result_int(), 413);
}

TEST_F(HttpServerTest, ExpectContinue) {
  Client c(port());
  c.send("POST /body HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  Response interim = c.read();
  EXPECT_EQ(interim.result_int(), 100);
  c.send("abc");
  Response r = c.read();
  EXPECT_EQ(r.result_int(), 200);
  EXPECT_EQ(r.body(), "3:abc");
}

TEST_F(HttpServerTest, GarbageIs400ThenClose) {
  for (std::string garbage :
       {std::string("GARBAGE\r\n\r\n"), std::string("\x16\x03\x01\x02\x00\x01\x00\r\n\r\n", 11),
        std::string("GET / HTTP/9.9\r\n\r\n"), std::string("GET /hello HTTP/1.1\r\nBad Header\r\n\r\n")}) {
    Client c(port());
    c.send(garbage);
    Response r = c.read();
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_NE(r.body().find("\"code\":\"bad_request\""), std::string::npos) << r.body();
    EXPECT_EQ(field(r, "X-Request-Id").size(), 16u);
    EXPECT_FALSE(r.keep_alive());
    EXPECT_TRUE(c.closed_by_peer());
  }
}

TEST_F(HttpServerTest, HugeHeaderIs400) {
  Client c(port());
  Response r = c.request("GET", "/hello", "X-Big: " + std::string(64 * 1024, 'h') + "\r\n");
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_NE(r.body().find("headers exceed"), std::string::npos) << r.body();
}

TEST_F(HttpServerTest, UnknownRouteIs404Json) {
  Client c(port());
  Response r = c.request("GET", "/no/such/route", "X-Request-Id: r404\r\n");
  EXPECT_EQ(r.result_int(), 404);
  EXPECT_EQ(field(r, "Content-Type"), "application/json");
  EXPECT_EQ(r.body(),
            "{\"error\":{\"code\":\"not_found\",\"message\":\"no route for GET /no/such/route\","
            "\"request_id\":\"r404\"}}");
  EXPECT_TRUE(r.keep_alive());  // an error reply does not cost the connection
  EXPECT_EQ(c.request("GET", "/hello").body(), "hello");
}

TEST_F(HttpServerTest, WrongMethodIs405) {
  Client c(port());
  Response r = c.request("DELETE", "/hello");
  EXPECT_EQ(r.result_int(), 405);
  EXPECT_EQ(field(r, "Allow"), "GET, HEAD");
  EXPECT_NE(r.body().find("method_not_allowed"), std::string::npos);
}

TEST_F(HttpServerTest, HeadUsesGetWithoutBody) {
  Client c(port());
  Response r = c.request("HEAD", "/hello");
  EXPECT_EQ(r.result_int(), 200);
  EXPECT_EQ(field(r, "Content-Length"), "5");
  EXPECT_TRUE(r.body().empty());
  // The connection is still in sync.
  EXPECT_EQ(c.request("GET", "/hello").body(), "hello");
}

TEST_F(HttpServerTest, NoContent) {
  Client c(port());
  Response r = c.request("GET", "/empty");
  EXPECT_EQ(r.result_int(), 204);
  EXPECT_TRUE(r.body().empty());
  EXPECT_EQ(c.request("GET", "/hello").body(), "hello");
}

TEST_F(HttpServerTest, TensordErrorGoesThroughErrorReply) {
  Client c(port());
  Response r = c.request("GET", "/error", "X-Request-Id: e1\r\n");
  EXPECT_EQ(r.result_int(), 422);
  EXPECT_EQ(r.body(),
            "{\"error\":{\"code\":\"shape_mismatch\",\"message\":\"add: shapes [2] and [3]\","
            "\"node\":\"n3\",\"request_id\":\"e1\"}}");
  r = c.request("GET", "/busy");
  EXPECT_EQ(r.result_int(), 429);
  EXPECT_EQ(field(r, "Retry-After"), "1");
  EXPECT_NE(r.body().find("\"code\":\"queue_full\""), std::string::npos);
}

TEST_F(HttpServerTest, OtherExceptionsAre500) {
  Client c(port());
  Response r = c.request("GET", "/crash", "X-Request-Id: c1\r\n");
  EXPECT_EQ(r.result_int(), 500);
  EXPECT_EQ(r.body(), "{\"error\":{\"code\":\"internal\",\"message\":\"internal error\",\"request_id\":\"c1\"}}");
  r = c.request("GET", "/int");
  EXPECT_EQ(r.result_int(), 500);
  // The server is still fine.
  EXPECT_EQ(c.request("GET", "/hello").body(), "hello");
}

TEST_F(HttpServerTest, RecordsMetricsByRouteTemplate) {
  Client c(port());
  c.request("GET", "/echo/metrics/test");
  c.request("GET", "/definitely-unmatched");
  std::string text = render_metrics();
  EXPECT_NE(text.find("tensord_http_requests_total{code=\"200\",method=\"GET\",route=\"/echo/{rest}\"}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tensord_http_requests_total{code=\"404\",method=\"GET\",route=\"unmatched\"}"),
            std::string::npos);
  EXPECT_NE(text.find("tensord_http_request_duration_seconds_bucket{route=\"/echo/{rest}\",le=\"0.0001\"}"),
            std::string::npos);
  EXPECT_NE(text.find("le=\"60\""), std::string::npos);
  EXPECT_EQ(text.find("/echo/metrics/test"), std::string::npos);  // never the raw path
}

TEST_F(HttpServerTest, IdleConnectionTimesOut) {
  Client c(port());
  EXPECT_EQ(c.request("GET", "/hello").body(), "hello");
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closed_by_peer());  // idle_timeout = 2 s
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(1500));
  EXPECT_LT(waited, std::chrono::seconds(5));
}

TEST_F(HttpServerTest, SlowHeadersTimeOut) {
  Client c(port());
  c.send("GET /hello HTTP/1.1\r\nHost: t\r\n");  // never finished
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closed_by_peer());  // header_timeout = 1 s
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
}

TEST_F(HttpServerTest, ConcurrentClients) {
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      Client c(port());
      for (int i = 0; i < 50; ++i) {
        Response r = c.request("GET", "/echo/" + std::to_string(t) + "/" + std::to_string(i));
        if (r.body() == "/echo/" + std::to_string(t) + "/" + std::to_string(i) + "|" + std::to_string(t) + "/" +
                            std::to_string(i) + "|ua=") {
          ok++;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 400);
}

TEST_F(HttpServerTest, RequestStopDrainsInflightThenReturns) {
  Client idle(port());
  EXPECT_EQ(idle.request("GET", "/hello").body(), "hello");

  auto slow = std::async(std::launch::async, [this] {
    Client c(port());
    return c.request("GET", "/slow");
  });
  while (!slow_started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(server->inflight(), 1u);
  auto t0 = std::chrono::steady_clock::now();
  server->request_stop();
  while (!server->draining()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // A new request on an existing connection while draining: 503, then close.
  Response late = idle.request("GET", "/hello");
  EXPECT_EQ(late.result_int(), 503);
  EXPECT_NE(late.body().find("\"code\":\"unavailable\""), std::string::npos) << late.body();
  EXPECT_FALSE(late.keep_alive());
  thread.join();  // run() returns once the slow request is answered
  EXPECT_TRUE(server->draining());
  EXPECT_EQ(server->inflight(), 0u);
  EXPECT_EQ(drain_calls.load(), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));

  Response r = slow.get();
  EXPECT_EQ(r.result_int(), 200);
  EXPECT_EQ(r.body(), "slow done");
  EXPECT_FALSE(r.keep_alive());  // draining: no more requests on it

  // No longer accepting.
  EXPECT_THROW(Client c(port()), boost::system::system_error);

  // TearDown's request_stop after run() returned is harmless.
  thread = std::thread([] {});
}

TEST(HttpServer, BindFailureThrows) {
  auto router = std::make_shared<Router>();
  ServerOptions opts;
  opts.port = 0;
  HttpServer first(opts, router);
  opts.port = first.port();
  EXPECT_THROW(HttpServer second(opts, router), std::runtime_error);
  opts.host = "no-such-host.invalid";
  EXPECT_THROW(HttpServer third(opts, router), std::runtime_error);
}

TEST(HttpServer, StopBeforeRunReturnsPromptly) {
  auto router = std::make_shared<Router>();
  ServerOptions opts;
  opts.port = 0;
  opts.io_threads = 0;  // auto
  HttpServer s(opts, router);
  s.request_stop();
  s.run();
  EXPECT_TRUE(s.draining());
}

TEST(HttpServer, DrainWaitsForBusyWorkThenExpiresItAtTheTimeout) {
  // Work outside HTTP requests (jobs) keeps the drain waiting up to
  // drain_timeout; then `expire` is called (cancel) and the drain ends once
  // the work is gone, well within kCancelGrace.
  auto router = std::make_shared<Router>();
  ServerOptions opts;
  opts.port = 0;
  opts.drain_timeout = std::chrono::seconds(1);
  HttpServer s(opts, router);
  std::atomic<size_t> jobs{1};
  std::atomic<int> begins{0}, expires{0};
  std::atomic<std::chrono::steady_clock::time_point::rep> expired_at{0};
  s.set_drain_hooks(HttpServer::DrainHooks{[&] { begins++; }, [&] { return jobs.load(); },
                                           [&] {
                                             if (expires++ == 0) {
                                               expired_at = std::chrono::steady_clock::now().time_since_epoch().count();
                                             }
                                             jobs = 0;  // cancelled: the job ends
                                           }});
  const auto t0 = std::chrono::steady_clock::now();
  s.request_stop();
  s.run();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(begins.load(), 1);
  EXPECT_GE(expires.load(), 1);
  const auto expired = std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(expired_at.load()));
  EXPECT_GE(expired - t0, std::chrono::milliseconds(950)) << "busy work gets the drain timeout";
  EXPECT_LT(took, std::chrono::milliseconds(1800));
}

TEST(HttpServer, DrainGivesUpOnWorkThatIgnoresCancellation) {
  auto router = std::make_shared<Router>();
  ServerOptions opts;
  opts.port = 0;
  opts.drain_timeout = std::chrono::seconds(0);
  HttpServer s(opts, router);
  std::atomic<int> expires{0};
  s.set_drain_hooks(HttpServer::DrainHooks{{}, [] { return size_t{1}; }, [&] { expires++; }});
  const auto t0 = std::chrono::steady_clock::now();
  s.request_stop();
  s.run();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, HttpServer::kCancelGrace - std::chrono::milliseconds(50));
  EXPECT_LT(took, HttpServer::kCancelGrace + std::chrono::seconds(1));
  EXPECT_GT(expires.load(), 1) << "asked again while it lasts";
}

}  // namespace
}  // namespace tensord
