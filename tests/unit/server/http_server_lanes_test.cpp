// HttpServer::set_lanes: what the handler pool would run for a
// request (an offloaded handler; an async request's start with a large
// body and its large answer's encoding) runs on the lane its Authorization
// names, on threads pinned to the lane's cpus at the compute nice, and on
// the shared pool when it names no lane.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <atomic>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ops/cpu/thread_pool.h"
#include "server/caller.h"
#include "server/http_server.h"
#include "server/router.h"

namespace tensord {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

// A caller with no tenant whose lane is `lane` (the lanes are all this
// server knows of its callers).
std::shared_ptr<const Caller> caller_on(std::string lane) {
  auto c = std::make_shared<Caller>();
  c->lane = std::move(lane);
  return c;
}

std::vector<int> thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  pthread_getaffinity_np(pthread_self(), sizeof(set), &set);
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

int thread_nice() {
  return getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
}

// "cpus;nice" of the calling thread, e.g. "0,1;0".
std::string where() {
  std::string out;
  for (int c : thread_cpus()) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out + ";" + std::to_string(thread_nice());
}

HttpResponse text(std::string body) {
  HttpResponse r;
  r.content_type = "text/plain";
  r.body = std::move(body);
  return r;
}

std::string request(uint16_t port, const std::string& method, const std::string& target, const std::string& auth,
                    const std::string& body = "") {
  net::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  std::string raw = method + " " + target + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n";
  if (!auth.empty()) raw += "Authorization: " + auth + "\r\n";
  raw += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  net::write(s, net::buffer(raw));
  boost::beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(s, buf, res);
  return std::to_string(res.result_int()) + " " + res.body();
}

TEST(HttpServerLanes, RequestWorkRunsOnItsTenantsLane) {
  const std::vector<int> all = thread_cpus();
  ASSERT_FALSE(all.empty());
  const int base_nice = thread_nice();
  const int lane_cpu = all.back();
  if (all.size() < 2) {
    std::printf("one CPU allowed: the lane's cpus equal the pool's, only the nice tells them apart\n");
  }
  auto router = std::make_shared<Router>();
  router->add_offloaded("GET", "/where", [](HttpRequest&) { return text(where()); });
  // Started on the pool (its body is over the inline limit of 0 bytes); the
  // answer is encoded on the pool too (heavy).
  router->add_async(
      "POST", "/async",
      [](HttpRequest&, std::shared_ptr<AsyncReply> reply) {
        std::string started = where();
        reply->finish(true, [started] { return text(started + "|" + where()); });
      },
      0);
  ServerOptions opts;
  opts.port = 0;
  opts.io_threads = 2;
  HttpServer server(opts, router);
  std::map<std::string, HttpServer::Lane> lanes;
  lanes["lane-a"] = HttpServer::Lane{{lane_cpu}, 2};
  server.set_lanes(std::move(lanes));
  server.set_callers([](std::string_view auth) {
    if (auth == "Bearer throws") throw std::runtime_error("lookup failed");
    return caller_on(auth == "Bearer a" ? "lane-a" : auth == "Bearer ghost" ? "no-such-lane" : "");
  });
  std::thread t([&server] { server.run(); });

  const std::string lane = std::to_string(lane_cpu) + ";" + std::to_string(std::max(base_nice, kComputeNice));
  std::string pool;
  for (int c : all) pool += (pool.empty() ? "" : ",") + std::to_string(c);
  pool += ";" + std::to_string(base_nice);

  EXPECT_EQ(request(server.port(), "GET", "/where", "Bearer a"), "200 " + lane);
  EXPECT_EQ(request(server.port(), "GET", "/where", ""), "200 " + pool) << "no lane: the shared pool";
  EXPECT_EQ(request(server.port(), "GET", "/where", "Bearer ghost"), "200 " + pool) << "an unknown lane";
  EXPECT_EQ(request(server.port(), "GET", "/where", "Bearer throws"), "200 " + pool) << "a lookup that throws";
  EXPECT_EQ(request(server.port(), "POST", "/async", "Bearer a", "x"), "200 " + lane + "|" + lane)
      << "an async request's start and its heavy answer";
  EXPECT_EQ(request(server.port(), "POST", "/async", "", "x"), "200 " + pool + "|" + pool);
  // Many at once on a lane of two threads: all answered.
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&] { ok += request(server.port(), "GET", "/where", "Bearer a") == "200 " + lane; });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), 8);

  server.request_stop();
  t.join();
  EXPECT_EQ(thread_cpus(), all) << "the test's own thread is untouched";
}

// Sends each of `raws` on one kept-alive connection; the answers' "status body".
std::vector<std::string> requests_on_one_connection(uint16_t port, const std::vector<std::string>& raws) {
  net::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  boost::beast::flat_buffer buf;
  std::vector<std::string> out;
  for (const auto& raw : raws) {
    net::write(s, net::buffer(raw));
    http::response<http::string_body> res;
    do {  // a 100 Continue comes first when the request asked for it
      res = {};
      http::read(s, buf, res);
    } while (res.result_int() / 100 == 1);
    out.push_back(std::to_string(res.result_int()) + " " + res.body());
  }
  return out;
}

std::string raw_request(const std::string& method, const std::string& target, const std::string& auth,
                        const std::string& body, bool expect_continue = false) {
  std::string raw = method + " " + target + " HTTP/1.1\r\nHost: t\r\n";
  if (!auth.empty()) raw += "Authorization: " + auth + "\r\n";
  if (expect_continue) raw += "Expect: 100-continue\r\n";
  return raw + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The connection's socket I/O moves to its tenant's lane once a request
// names it: an inline handler (which runs on the connection's strand) then
// runs on the lane's pinned threads; a connection naming no lane stays on
// the io threads. Bodies, 100-continue and kept-alive requests work after
// the move.
TEST(HttpServerLanes, ConnectionsMoveToTheirTenantsLane) {
  const std::vector<int> all = thread_cpus();
  ASSERT_FALSE(all.empty());
  const int base_nice = thread_nice();
  const int lane_cpu = all.back();
  auto router = std::make_shared<Router>();
  router->add("GET", "/here", [](HttpRequest&) { return text(where()); });
  router->add("POST", "/echo", [](HttpRequest& req) { return text(where() + "|" + std::to_string(req.body.size())); });
  ServerOptions opts;
  opts.port = 0;
  opts.io_threads = 2;
  HttpServer server(opts, router);
  std::map<std::string, HttpServer::Lane> lanes;
  lanes["lane-a"] = HttpServer::Lane{{lane_cpu}, 1};
  lanes["lane-b"] = HttpServer::Lane{{all.front()}, 1};
  server.set_lanes(std::move(lanes));
  server.set_callers([](std::string_view auth) {
    return caller_on(auth == "Bearer a" ? "lane-a" : auth == "Bearer b" ? "lane-b" : "");
  });
  std::thread t([&server] { server.run(); });
  const std::string lane_a = std::to_string(lane_cpu) + ";" + std::to_string(std::max(base_nice, kComputeNice));
  const std::string lane_b = std::to_string(all.front()) + ";" + std::to_string(std::max(base_nice, kComputeNice));
  std::string io;
  for (int c : all) io += (io.empty() ? "" : ",") + std::to_string(c);
  io += ";" + std::to_string(base_nice);

  EXPECT_EQ(request(server.port(), "GET", "/here", "Bearer a"), "200 " + lane_a);
  EXPECT_EQ(request(server.port(), "GET", "/here", ""), "200 " + io) << "no lane: the io threads";
  const std::string body(3 << 20, 'x');  // several reads on the lane
  auto answers = requests_on_one_connection(
      server.port(), {raw_request("GET", "/here", "", ""), raw_request("GET", "/here", "Bearer a", ""),
                      raw_request("POST", "/echo", "Bearer a", body, true), raw_request("GET", "/here", "", ""),
                      raw_request("GET", "/here", "Bearer b", "")});
  ASSERT_EQ(answers.size(), 5u);
  EXPECT_EQ(answers[0], "200 " + io);
  EXPECT_EQ(answers[1], "200 " + lane_a) << "moved on its first request naming the lane";
  EXPECT_EQ(answers[2], "200 " + lane_a + "|" + std::to_string(body.size())) << "a body read on the lane";
  EXPECT_EQ(answers[3], "200 " + lane_a) << "a request naming no lane leaves it where it is";
  EXPECT_EQ(answers[4], "200 " + lane_b) << "another tenant's lane: moved again";

  server.request_stop();
  t.join();
}

// A connection keeps its last caller while its Authorization header and
// the callers' generation (the tenants: a reload moves it) stay the same:
// one token lookup per connection, not per request. The route sees the
// caller either way.
TEST(HttpServerLanes, AConnectionResolvesItsCallerOnceWhileHeaderAndGenerationHold) {
  auto router = std::make_shared<Router>();
  router->add("GET", "/who", [](HttpRequest& req) { return text(req.who ? req.who->lane : std::string("none")); });
  ServerOptions opts;
  opts.port = 0;
  opts.io_threads = 1;
  HttpServer server(opts, router);
  std::atomic<int> resolved{0};
  std::atomic<uint64_t> generation{7};
  server.set_callers(
      [&resolved](std::string_view auth) {
        ++resolved;
        return caller_on(std::string(auth));
      },
      [&generation] { return generation.load(); });
  std::thread t([&server] { server.run(); });

  auto get = [](const std::string& auth) { return raw_request("GET", "/who", auth, ""); };
  auto answers = requests_on_one_connection(server.port(), {get("Bearer a"), get("Bearer a"), get("Bearer a")});
  EXPECT_EQ(answers, (std::vector<std::string>{"200 Bearer a", "200 Bearer a", "200 Bearer a"}));
  EXPECT_EQ(resolved.load(), 1) << "one lookup for the connection's three requests";

  resolved = 0;
  answers = requests_on_one_connection(server.port(), {get("Bearer a"), get("Bearer b"), get("Bearer b"), get("")});
  EXPECT_EQ(answers, (std::vector<std::string>{"200 Bearer a", "200 Bearer b", "200 Bearer b", "200 "}));
  EXPECT_EQ(resolved.load(), 3) << "a new connection, then each change of header";

  resolved = 0;
  std::vector<std::string> around;
  {
    net::io_context ioc;
    tcp::socket s(ioc);
    s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server.port()));
    boost::beast::flat_buffer buf;
    for (int i = 0; i < 3; ++i) {
      if (i == 1) generation = 8;  // a reload between the first and second request
      net::write(s, net::buffer(get("Bearer a")));
      http::response<http::string_body> res;
      http::read(s, buf, res);
      around.push_back(res.body());
    }
  }
  EXPECT_EQ(around, (std::vector<std::string>{"Bearer a", "Bearer a", "Bearer a"}));
  EXPECT_EQ(resolved.load(), 2) << "the reload's new generation resolves again, once";

  server.request_stop();
  t.join();
}

TEST(HttpServerLanes, SetLanesOrCallersAfterRunThrows) {
  auto router = std::make_shared<Router>();
  ServerOptions opts;
  opts.port = 0;
  HttpServer s(opts, router);
  s.request_stop();
  s.run();
  EXPECT_THROW(s.set_lanes({}), std::logic_error);
  EXPECT_THROW(s.set_callers({}), std::logic_error);
}

}  // namespace
}  // namespace tensord
