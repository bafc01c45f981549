// libFuzzer target: the HTTP request path, bytes to reply, without sockets.
// Input: what a client writes on one keep-alive connection. Up to
// kMaxRequests requests are cut from it with Beast's request parser (the
// server's body and header limits), turned into HttpRequests as
// HttpSession::handle_request does, and dispatched through the Router that
// build_router() makes over a real AppContext: an Engine on the CPU backend,
// the anonymous tenant of default_config (with a 64 MiB memory quota, so a
// program cannot ask for more than that), a JobTable, a Checkpointer without
// a state dir (POST /v1/checkpoint: 503, nothing written). All of it is
// fresh for each input, so inputs are independent and a crash reproduces.
// The log is at level error (a line per request and job would drown the
// fuzzer's output).
//
// Invariants: no handler throws anything but a tensord::Error; no reply is
// a 5xx but 503 (a 500 is a bug by API.md 2); every 4xx/5xx reply is
// JSON {"error": {"code": <documented code>, "message", "request_id"}} with
// the status its code maps to; every JSON 2xx body parses; response headers
// are valid (a name of token characters, no CR/LF/NUL in a value); a
// request that failed left the stored tensors as they were.
// Bounded: a /v1/run or replay whose job has not answered within kReplyWait
// is cancelled as a client that went away would (its job stops at the next
// node boundary), and jobs from POST /v1/jobs are cancelled before the
// engine shuts down.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "api/error_reply.h"
#include "api/json_parse.h"
#include "ops/backend.h"
#include "scheduler/config.h"
#include "scheduler/engine.h"
#include "scheduler/graph_service.h"
#include "scheduler/job_table.h"
#include "scheduler/tenant.h"
#include "scheduler/tenant_registry.h"
#include "metrics/log.h"
#include "server/app.h"
#include "server/checkpointer.h"
#include "server/http_server.h"
#include "server/request_id.h"
#include "server/request_target.h"
#include "server/router.h"
#include "tests/fuzz/fuzz_util.h"

namespace tensord::fuzz {
namespace {

namespace http = boost::beast::http;

constexpr int kMaxRequests = 8;
constexpr auto kReplyWait = std::chrono::milliseconds(500);
constexpr int64_t kTenantQuota = 64 << 20;

std::string describe(const HttpRequest& req) {
  std::string t = req.target.size() > 200 ? req.target.substr(0, 200) + "..." : req.target;
  return req.method + " " + t;
}

// The error shape the server answers `req` in (API.md 2; 11: {"error":
// "<message>"} on /v2 routes), as HttpSession::call_handler picks it.
ErrorStyle style_of(const HttpRequest& req) {
  return error_style_for(req.path.empty() ? req.target : req.path);
}

// Answers as HttpSession::guarded does, except that a non-tensord exception
// (a 500 in the server) is a bug here.
HttpResponse guarded(const std::function<HttpResponse()>& f, const HttpRequest& req) {
  try {
    return f();
  } catch (const Error& e) {
    return error_reply(e, req.request_id, 0, style_of(req));
  } catch (const std::exception& e) {
    fail(describe(req) + ": a handler threw a non-tensord exception: " + e.what());
  } catch (...) {
    fail(describe(req) + ": a handler threw a non-exception");
  }
}

// The AsyncReply of one request: keeps the answer for the fuzzer's thread.
class CapturedReply : public AsyncReply {
 public:
  explicit CapturedReply(HttpRequest req) : req_(std::move(req)) {}

  void finish(bool, std::function<HttpResponse()> make) override {
    {
      std::lock_guard lk(mu_);
      if (finished_) return;
      finished_ = true;
    }
    HttpResponse out = guarded(make, req_);
    std::lock_guard lk(mu_);
    out_ = std::move(out);
    cv_.notify_all();
  }

  void on_client_gone(std::function<void()> f) override {
    {
      std::lock_guard lk(mu_);
      if (!gone_) {
        on_gone_ = std::move(f);
        return;
      }
    }
    f();
  }

  // Waits for the answer; past kReplyWait the client "goes away" (cancels).
  HttpResponse wait() {
    std::unique_lock lk(mu_);
    if (!cv_.wait_for(lk, kReplyWait, [&] { return out_.has_value(); })) {
      gone_ = true;
      std::function<void()> f;
      f.swap(on_gone_);
      lk.unlock();
      if (f) f();
      lk.lock();
      cv_.wait(lk, [&] { return out_.has_value(); });  // libFuzzer's -timeout bounds this
    }
    return std::move(*out_);
  }

 private:
  const HttpRequest req_;  // method, target and request id, for messages
  std::mutex mu_;
  std::condition_variable cv_;
  bool finished_ = false;
  bool gone_ = false;
  std::function<void()> on_gone_;
  std::optional<HttpResponse> out_;
};

bool is_token_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// http_status() of each documented code name (API.md 2), and the router's
// 405 "method_not_allowed".
const std::map<std::string, int>& status_of_code() {
  static const std::map<std::string, int> m = [] {
    std::map<std::string, int> out;
    for (int c = 0; c <= static_cast<int>(ErrorCode::kUnsupported); ++c) {
      auto code = static_cast<ErrorCode>(c);
      out.emplace(std::string(error_code_name(code)), http_status(code));
    }
    out.emplace("method_not_allowed", 405);
    return out;
  }();
  return m;
}

void check_response(const HttpRequest& req, const HttpResponse& res) {
  const std::string who = describe(req) + " -> " + std::to_string(res.status);
  check(res.status >= 200 && res.status <= 599, who + ": status out of range");
  check(res.status < 500 || res.status == 503 || res.status == 504,
        who + ": server error (API.md 2: 500 is a bug): " + res.body.substr(0, 2000));
  for (const auto& [name, value] : res.headers) {
    bool ok = !name.empty();
    for (char c : name) ok &= is_token_char(c);
    for (char c : value) ok &= (c != '\r' && c != '\n' && c != '\0');
    check(ok, who + ": invalid response header '" + name + "'");
  }
  const bool json = res.content_type == "application/json";
  if (res.status >= 400) {
    check(json, who + ": error reply of type " + res.content_type);
    rapidjson::Document d;
    expect_no_throw("parsing an error reply", [&] { parse_json(res.body, d, "reply"); });
    if (style_of(req) == ErrorStyle::kKServe) {
      // KServe's shape (API.md 11): a message, nothing else to check.
      check(d.IsObject() && d.HasMember("error") && d["error"].IsString() && d["error"].GetStringLength() > 0,
            who + ": no KServe error message: " + res.body);
      return;
    }
    check(d.IsObject() && d.HasMember("error") && d["error"].IsObject(), who + ": no error object: " + res.body);
    const auto& e = d["error"];
    check(e.HasMember("code") && e["code"].IsString() && e.HasMember("message") && e["message"].IsString() &&
              e["message"].GetStringLength() > 0 && e.HasMember("request_id") && e["request_id"].IsString(),
          who + ": error object without code, message or request_id: " + res.body);
    check(e["request_id"].GetString() == req.request_id, who + ": error reply names another request id");
    auto it = status_of_code().find(e["code"].GetString());
    check(it != status_of_code().end(), who + ": undocumented error code: " + res.body);
    check(it->second == res.status, who + ": status does not match the error code: " + res.body);
  } else if (json && !res.body.empty()) {
    rapidjson::Document d;
    expect_no_throw("parsing a JSON reply", [&] { parse_json(res.body, d, "reply", 256); });
  }
}

// One input's server: everything the router's handlers reach.
struct Server {
  Server() {
    ServerConfig config = default_config(2);
    config.tenants[0].memory_bytes = kTenantQuota;
    EngineOptions eo;
    eo.cores = 1;
    engine = std::make_unique<Engine>(make_backend("cpu", 1), config, eo);
    tenants = std::make_unique<TenantRegistry>(config);
    checkpointer = std::make_unique<Checkpointer>("", tenants.get());
    graphs = std::make_unique<GraphService>(*engine);
    app.engine = engine.get();
    app.graphs = graphs.get();
    app.tenants = tenants.get();
    app.jobs = &jobs;
    app.version = "fuzz";
    app.checkpointer = checkpointer.get();
    app.max_body_bytes = ServerOptions{}.max_body_bytes;
    app.draining = [] { return false; };
    router = build_router(app);
  }
  ~Server() {
    // Whatever still runs (POST /v1/jobs) stops at its next node boundary.
    for (const auto& id : job_ids) {
      if (auto j = jobs.find("default", id)) j->cancel("fuzz input done");
    }
    engine->begin_drain();
    engine->cancel_running(Error(ErrorCode::kUnavailable, "fuzz input done"));
    engine->shutdown();
  }

  std::unique_ptr<Engine> engine;
  std::unique_ptr<GraphService> graphs;  // destroyed before the engine it uses
  std::unique_ptr<TenantRegistry> tenants;
  std::unique_ptr<Checkpointer> checkpointer;
  JobTable jobs;
  AppContext app;
  std::shared_ptr<Router> router;
  std::vector<std::string> job_ids;  // from 202 replies
};

HttpResponse serve(Server& s, HttpRequest& req) {
  // As HttpSession::handle_request: one match, then call_handler or
  // handle_async.
  std::optional<RouteMatch> match;
  try {
    parse_target(req.target, req.path, req.query);
    match = s.router->match(req.method, req.path);
  } catch (const Error&) {
    req.path.clear();  // reported below
  }
  if (!match || match->dispatch() != Dispatch::kAsync) {
    return guarded(
        [&]() -> HttpResponse {
          if (match) return match->call(req);
          parse_target(req.target, req.path, req.query);  // throws: the target is bad
          throw Error(ErrorCode::kInternal, "a request without a route match");
        },
        req);
  }
  auto reply = std::make_shared<CapturedReply>(req);
  try {
    match->call_async(req, reply);
  } catch (...) {
    HttpResponse err = guarded([]() -> HttpResponse { throw; }, req);
    reply->finish(false, [err] { return err; });
  }
  return reply->wait();
}

}  // namespace
}  // namespace tensord::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tensord::log::configure(tensord::log::Format::kText, tensord::log::Level::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensord;
  using namespace tensord::fuzz;
  const char* p = reinterpret_cast<const char*>(data);
  size_t left = size;
  std::optional<Server> server;
  for (int n = 0; n < kMaxRequests && left > 0; ++n) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(ServerOptions{}.max_body_bytes);
    parser.header_limit(static_cast<std::uint32_t>(ServerOptions{}.max_header_bytes));
    parser.eager(true);
    boost::beast::error_code ec;
    while (!parser.is_done()) {
      size_t used = parser.put(boost::asio::buffer(p, left), ec);
      p += used;
      left -= used;
      if (ec == http::error::need_more && used > 0 && left > 0) {
        ec = {};
        continue;
      }
      break;
    }
    // Incomplete (the server would wait for more) or not HTTP (it answers
    // 400/413 and closes): the connection ends.
    if (ec || !parser.is_done()) break;

    auto msg = parser.release();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    for (const auto& field : msg) {
      std::string name(field.name_string());
      for (auto& c : name) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      }
      auto [it, inserted] = req.headers.emplace(name, std::string(field.value()));
      if (!inserted) {
        it->second += ", ";
        it->second += field.value();
      }
    }
    req.body = std::move(msg.body());
    auto rid = msg.find("x-request-id");
    req.request_id = request_id_for(rid == msg.end() ? std::string_view() : std::string_view(rid->value()));

    if (!server) server.emplace();
    HttpRequest copy = req;  // what the handler got, for messages (handlers may move the body)
    const TensorStore& store = server->tenants->default_tenant()->store;
    const uint64_t version = store.version();
    HttpResponse res = serve(*server, req);
    check_response(copy, res);
    // API.md 2: a request that failed changed no stored state. (Unless a job
    // from POST /v1/jobs, still running, committed meanwhile.)
    if (res.status >= 400 && server->job_ids.empty()) {
      check(store.version() == version,
            describe(copy) + " -> " + std::to_string(res.status) + ": a failed request changed the stored tensors");
    }
    if (res.status == 202) {
      rapidjson::Document d;
      parse_json(res.body, d, "reply");
      if (d.IsObject() && d.HasMember("id") && d["id"].IsString()) server->job_ids.emplace_back(d["id"].GetString());
    }
    if (!msg.keep_alive()) break;
  }
  return 0;
}
