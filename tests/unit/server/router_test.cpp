#include "server/router.h"

#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/error.h"
#include "server/request_target.h"

namespace tensord {
namespace {

// A handler that answers "<tag>" and leaves the params in the request.
Handler tagged(const std::string& tag) {
  return [tag](HttpRequest&) {
    HttpResponse r;
    r.body = tag;
    return r;
  };
}

// Matches the request once and calls its (inline) route, as the session does.
HttpResponse dispatch(const Router& r, HttpRequest& req) {
  return r.match(req.method, req.path).call(req);
}

HttpRequest request(const std::string& method, const std::string& path) {
  HttpRequest req;
  req.method = method;
  req.path = path;
  req.target = path;
  req.request_id = "rid-1";
  return req;
}

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router.add("GET", "/healthz", tagged("healthz"));
    router.add("GET", "/v1/tensors", tagged("list"));
    router.add("PUT", "/v1/tensors/{name...}", tagged("put"));
    router.add("GET", "/v1/tensors/{name...}", tagged("get"));
    router.add("DELETE", "/v1/tensors/{name...}", tagged("delete"));
    router.add("POST", "/v1/tensors:upload", tagged("upload"));
    router.add("GET", "/v1/graphs/{id}", tagged("graph"));
    router.add("POST", "/v1/graphs/{id}/replay", tagged("replay"));
    router.add("GET", "/v1/jobs/{id}", tagged("job"));
    router.add("POST", "/v1/jobs/{id}:cancel", tagged("cancel"));
    router.add("GET", "/v1/files/{path...}/meta", tagged("meta"));
    router.add("HEAD", "/v1/heads/{id}", tagged("head"));
    router.add("GET", "/v1/heads/{id}", tagged("head-get"));
  }

  // Dispatches and returns the handler's tag.
  std::string route(const std::string& method, const std::string& path) {
    last = request(method, path);
    return dispatch(router, last).body;
  }

  Router router;
  HttpRequest last;
};

TEST_F(RouterTest, ExactRoute) {
  EXPECT_EQ(route("GET", "/healthz"), "healthz");
  EXPECT_EQ(last.route, "/healthz");
  EXPECT_TRUE(last.params.empty());
  EXPECT_EQ(route("GET", "/v1/tensors"), "list");
}

TEST_F(RouterTest, GreedyParamSpansSlashes) {
  EXPECT_EQ(route("GET", "/v1/tensors/a"), "get");
  EXPECT_EQ(last.params.at("name"), "a");
  EXPECT_EQ(last.route, "/v1/tensors/{name}");
  EXPECT_EQ(route("PUT", "/v1/tensors/model/layer.0/w"), "put");
  EXPECT_EQ(last.params.at("name"), "model/layer.0/w");
  EXPECT_EQ(route("DELETE", "/v1/tensors/x/y"), "delete");
  EXPECT_EQ(last.params.at("name"), "x/y");
}

TEST_F(RouterTest, ParamsAreNotValidatedHere) {
  // Decoded "%2e%2e" reaches the handler, which must validate it.
  EXPECT_EQ(route("GET", "/v1/tensors/../etc"), "get");
  EXPECT_EQ(last.params.at("name"), "../etc");
}

TEST_F(RouterTest, ColonSuffixRoutes) {
  EXPECT_EQ(route("POST", "/v1/tensors:upload"), "upload");
  EXPECT_EQ(last.route, "/v1/tensors:upload");
  EXPECT_EQ(route("POST", "/v1/jobs/j-17:cancel"), "cancel");
  EXPECT_EQ(last.params.at("id"), "j-17");
  EXPECT_EQ(last.route, "/v1/jobs/{id}:cancel");
  EXPECT_EQ(route("GET", "/v1/jobs/j-17"), "job");
  EXPECT_EQ(last.params.at("id"), "j-17");
}

TEST_F(RouterTest, LiteralSuffixAfterParam) {
  EXPECT_EQ(route("POST", "/v1/graphs/g1/replay"), "replay");
  EXPECT_EQ(last.params.at("id"), "g1");
  EXPECT_EQ(last.route, "/v1/graphs/{id}/replay");
  EXPECT_EQ(route("GET", "/v1/graphs/g1"), "graph");
  EXPECT_EQ(last.params.at("id"), "g1");
  // Greedy param followed by a literal.
  EXPECT_EQ(route("GET", "/v1/files/a/b/c/meta"), "meta");
  EXPECT_EQ(last.params.at("path"), "a/b/c");
}

TEST_F(RouterTest, NonGreedyParamIsOneSegment) {
  EXPECT_THROW(route("GET", "/v1/graphs/a/b"), Error);
  EXPECT_THROW(route("GET", "/v1/graphs/"), Error);  // params are non-empty
}

TEST_F(RouterTest, EmptyGreedyParamDoesNotMatch) {
  try {
    route("GET", "/v1/tensors/");
    FAIL() << "expected not_found";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
}

TEST_F(RouterTest, UnknownPathIsNotFound) {
  try {
    route("GET", "/nope");
    FAIL() << "expected not_found";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_EQ(e.message(), "no route for GET /nope");
  }
  EXPECT_TRUE(last.route.empty());
}

TEST_F(RouterTest, NotFoundMessageIsSanitized) {
  try {
    route("GET", std::string("/bad\x01\xff") + std::string(300, 'a'));
    FAIL();
  } catch (const Error& e) {
    for (char c : e.message()) EXPECT_TRUE(c >= 0x20 && c < 0x7f);
    EXPECT_LT(e.message().size(), 260u);
  }
}

TEST_F(RouterTest, WrongMethodIs405WithAllow) {
  HttpRequest req = request("POST", "/v1/tensors/a/b");
  HttpResponse res = dispatch(router, req);
  EXPECT_EQ(res.status, 405);
  ASSERT_EQ(res.headers.size(), 1u);
  EXPECT_EQ(res.headers[0].first, "Allow");
  EXPECT_EQ(res.headers[0].second, "DELETE, GET, HEAD, PUT");
  EXPECT_NE(res.body.find("\"code\":\"method_not_allowed\""), std::string::npos) << res.body;
  EXPECT_NE(res.body.find("\"request_id\":\"rid-1\""), std::string::npos) << res.body;
  EXPECT_EQ(req.route, "/v1/tensors/{name}");

  req = request("GET", "/v1/tensors:upload");
  res = dispatch(router, req);
  EXPECT_EQ(res.status, 405);
  EXPECT_EQ(res.headers[0].second, "POST");
}

TEST_F(RouterTest, HeadFallsBackToGet) {
  EXPECT_EQ(route("HEAD", "/v1/tensors/a"), "get");
  EXPECT_EQ(last.params.at("name"), "a");
  EXPECT_EQ(route("HEAD", "/healthz"), "healthz");
  // An explicit HEAD route wins over the GET fallback.
  EXPECT_EQ(route("HEAD", "/v1/heads/h"), "head");
  EXPECT_EQ(route("GET", "/v1/heads/h"), "head-get");
  // No GET, no fallback.
  HttpRequest req = request("HEAD", "/v1/tensors:upload");
  EXPECT_EQ(dispatch(router, req).status, 405);
}

TEST(Router, LiteralRouteBeatsParamRoute) {
  Router r;
  r.add("GET", "/v1/tensors/{name...}", tagged("param"));
  r.add("GET", "/v1/tensors/special", tagged("literal"));
  r.add("GET", "/v1/x/{a}", tagged("one"));
  r.add("GET", "/v1/x/{a...}", tagged("greedy"));
  HttpRequest req = request("GET", "/v1/tensors/special");
  EXPECT_EQ(dispatch(r, req).body, "literal");
  req = request("GET", "/v1/tensors/other");
  EXPECT_EQ(dispatch(r, req).body, "param");
  req = request("GET", "/v1/x/a");
  EXPECT_EQ(dispatch(r, req).body, "one");
  req = request("GET", "/v1/x/a/b");
  EXPECT_EQ(dispatch(r, req).body, "greedy");
}

TEST(Router, MultipleParams) {
  Router r;
  r.add("GET", "/v1/{tenant}/jobs/{id}", tagged("x"));
  HttpRequest req = request("GET", "/v1/alice/jobs/42");
  EXPECT_EQ(dispatch(r, req).body, "x");
  EXPECT_EQ(req.params.at("tenant"), "alice");
  EXPECT_EQ(req.params.at("id"), "42");
}

// Routes are looked up by the path's first two segments; a template with
// a param among them ("/v1/{tenant}/...") is a candidate for every path,
// and precedence still holds across the two kinds.
TEST(Router, ParamsInTheFirstSegmentsStillMatchInPrecedence) {
  Router r;
  r.add("GET", "/v1/{tenant}/jobs", tagged("wild"));
  r.add("POST", "/v1/graphs/jobs", tagged("literal"));
  r.add("GET", "/{any...}", tagged("catch-all"));
  r.add("GET", "/v1", tagged("root"));
  HttpRequest req = request("GET", "/v1/alice/jobs");
  EXPECT_EQ(dispatch(r, req).body, "wild");
  EXPECT_EQ(req.params.at("tenant"), "alice");
  req = request("POST", "/v1/graphs/jobs");
  EXPECT_EQ(dispatch(r, req).body, "literal");
  req = request("GET", "/v1/graphs/jobs");  // the literal is POST only: the wild route's GET
  EXPECT_EQ(dispatch(r, req).body, "wild");
  req = request("DELETE", "/v1/graphs/jobs");
  HttpResponse resp = dispatch(r, req);
  EXPECT_EQ(resp.status, 405);
  bool listed = false;
  for (const auto& [k, v] : resp.headers) {
    if (k == "Allow") {
      listed = true;
      EXPECT_EQ(v, "GET, HEAD, POST");
    }
  }
  EXPECT_TRUE(listed);
  req = request("GET", "/v1");
  EXPECT_EQ(dispatch(r, req).body, "root");
  req = request("GET", "/elsewhere/a/b");  // under no key: only the wild routes
  EXPECT_EQ(dispatch(r, req).body, "catch-all");
  EXPECT_EQ(req.params.at("any"), "elsewhere/a/b");
}

TEST(Router, HandlerExceptionsPropagate) {
  Router r;
  r.add("GET", "/boom", [](HttpRequest&) -> HttpResponse { throw Error(ErrorCode::kConflict, "no"); });
  HttpRequest req = request("GET", "/boom");
  EXPECT_THROW(dispatch(r, req), Error);
  EXPECT_EQ(req.route, "/boom");  // set before the handler runs: metrics label
}

// Records what an asynchronous route answered.
struct CapturedReply : AsyncReply {
  std::vector<HttpResponse> answers;
  std::vector<bool> heavy;
  void finish(bool h, std::function<HttpResponse()> make) override {
    heavy.push_back(h);
    answers.push_back(make());
  }
  void on_client_gone(std::function<void()>) override {}
};

TEST(Router, AsyncRoutes) {
  Router r;
  std::string seen;
  r.add_async(
      "POST", "/v1/graphs/{id}/replay",
      [&seen](HttpRequest& req, std::shared_ptr<AsyncReply> reply) {
        seen = req.route + " " + req.params.at("id");
        reply->finish(true, [] {
          HttpResponse out;
          out.body = "later";
          return out;
        });
      },
      1024);
  r.add("GET", "/v1/graphs/{id}", tagged("info"));
  RouteMatch m = r.match("POST", "/v1/graphs/g-1/replay");
  EXPECT_EQ(m.dispatch(), Dispatch::kAsync);
  EXPECT_EQ(m.route(), "/v1/graphs/{id}/replay");
  EXPECT_EQ(m.inline_body_bytes(), 1024u);
  EXPECT_EQ(r.match("GET", "/v1/graphs/g-1").dispatch(), Dispatch::kInline);
  EXPECT_EQ(r.match("GET", "/nowhere").dispatch(), Dispatch::kInline);
  EXPECT_EQ(r.match("GET", "/nowhere").route(), "");

  auto reply = std::make_shared<CapturedReply>();
  HttpRequest req = request("POST", "/v1/graphs/g-7/replay");
  r.match(req.method, req.path).call_async(req, reply);
  EXPECT_EQ(seen, "/v1/graphs/{id}/replay g-7");
  ASSERT_EQ(reply->answers.size(), 1u);
  EXPECT_EQ(reply->answers[0].body, "later");
  EXPECT_TRUE(reply->heavy[0]);

  // A route that is not asynchronous answers through the reply at once.
  auto other = std::make_shared<CapturedReply>();
  HttpRequest get = request("GET", "/v1/graphs/g-7");
  r.match(get.method, get.path).call_async(get, other);
  ASSERT_EQ(other->answers.size(), 1u);
  EXPECT_EQ(other->answers[0].body, "info");

  // Called synchronously (a bug), an asynchronous route is an internal error.
  HttpRequest sync = request("POST", "/v1/graphs/g-7/replay");
  try {
    dispatch(r, sync);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
  }
}

TEST(Router, OffloadedRoutesAreAsyncAndAnswerWithTheHandlersResult) {
  Router r;
  r.add_offloaded("PUT", "/v1/tensors/{name...}", [](HttpRequest& req) {
    HttpResponse out;
    out.body = req.route + " " + req.params.at("name") + " " + req.body;
    return out;
  });
  r.add_offloaded("POST", "/boom", [](HttpRequest&) -> HttpResponse { throw Error(ErrorCode::kConflict, "no"); });
  RouteMatch m = r.match("PUT", "/v1/tensors/a/b");
  EXPECT_EQ(m.dispatch(), Dispatch::kAsync);
  EXPECT_EQ(m.route(), "/v1/tensors/{name}");
  // Started where the request is read, whatever the body's size: only the
  // heavy answer (the handler's call) goes to the pool.
  EXPECT_EQ(m.inline_body_bytes(), std::numeric_limits<size_t>::max());
  HttpRequest req = request("PUT", "/v1/tensors/a/b");
  req.body = "body";
  auto reply = std::make_shared<CapturedReply>();
  m.call_async(req, reply);
  ASSERT_EQ(reply->answers.size(), 1u);
  EXPECT_TRUE(reply->heavy[0]);
  EXPECT_EQ(reply->answers[0].body, "/v1/tensors/{name} a/b body");
  // HEAD takes the GET route as it is (no GET here: 405, inline).
  EXPECT_EQ(r.match("HEAD", "/v1/tensors/a").dispatch(), Dispatch::kInline);
  EXPECT_EQ(r.match("HEAD", "/v1/tensors/a").route(), "/v1/tensors/{name}");
  r.add_offloaded("GET", "/v1/tensors/{name...}", [](HttpRequest&) { return HttpResponse{}; });
  EXPECT_EQ(r.match("HEAD", "/v1/tensors/a").dispatch(), Dispatch::kAsync);
  // What the handler throws comes out of the reply's make (the session
  // maps it as any handler's error).
  HttpRequest boom = request("POST", "/boom");
  auto failed = std::make_shared<CapturedReply>();
  EXPECT_THROW(r.match(boom.method, boom.path).call_async(boom, failed), Error);
}

TEST(Router, TenantRoutesRunTheAuthenticatorFirstAndPublicOnesDoNot) {
  Router r;
  int checks = 0;
  bool handled = false;
  r.set_authenticator([&checks](HttpRequest& req) {
    ++checks;
    if (req.header("authorization") != "Bearer ok") throw Error(ErrorCode::kUnauthenticated, "unknown token");
  });
  r.add("GET", "/healthz", tagged("live"), Access::kPublic);
  r.add("GET", "/v1/tensors", [&handled](HttpRequest&) {
    handled = true;
    return HttpResponse{};
  });
  r.add_async(
      "POST", "/v1/run", [&handled](HttpRequest&, std::shared_ptr<AsyncReply>) { handled = true; }, 1024);
  r.add_offloaded("PUT", "/v1/tensors/{name}", [&handled](HttpRequest&) {
    handled = true;
    return HttpResponse{};
  });

  EXPECT_FALSE(r.match("GET", "/healthz").authenticates());
  EXPECT_TRUE(r.match("GET", "/v1/tensors").authenticates());
  EXPECT_TRUE(r.match("HEAD", "/v1/tensors").authenticates()) << "HEAD takes its GET route's access";
  EXPECT_FALSE(r.match("GET", "/nowhere").authenticates());

  HttpRequest health = request("GET", "/healthz");
  EXPECT_EQ(dispatch(r, health).body, "live");
  EXPECT_EQ(checks, 0) << "a public route checks no token";

  HttpRequest get = request("GET", "/v1/tensors");
  try {
    dispatch(r, get);
    FAIL() << "expected 401";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnauthenticated);
  }
  EXPECT_EQ(checks, 1);
  EXPECT_FALSE(handled) << "the handler never ran";
  EXPECT_EQ(get.route, "/v1/tensors") << "the route is known for the log line and the metrics";

  for (const char* method : {"POST", "PUT"}) {
    HttpRequest req = request(method, std::string(method) == "POST" ? "/v1/run" : "/v1/tensors/a");
    auto reply = std::make_shared<CapturedReply>();
    EXPECT_THROW(r.match(req.method, req.path).call_async(req, reply), Error) << method;
    EXPECT_TRUE(reply->answers.empty()) << method << ": 401 before any work, on the starting thread";
    EXPECT_FALSE(handled) << method;
  }
  EXPECT_EQ(checks, 3);

  HttpRequest ok = request("GET", "/v1/tensors");
  ok.headers["authorization"] = "Bearer ok";
  dispatch(r, ok);
  EXPECT_TRUE(handled);

  HttpRequest missing = request("GET", "/nowhere");
  EXPECT_THROW(dispatch(r, missing), Error);
  EXPECT_EQ(checks, 4) << "an unknown path is 404 without a token check";
}

TEST(Router, AnUpgradeRouteSaysSoAndAnswersWithoutTheUpgrade) {
  Router r;
  r.add_upgrade("GET", "/v1/stream", tagged("426"));
  r.add("GET", "/v1/streams", tagged("list"));
  EXPECT_TRUE(r.match("GET", "/v1/stream").upgrades());
  EXPECT_FALSE(r.match("POST", "/v1/stream").upgrades()) << "another method: 405, no upgrade";
  EXPECT_FALSE(r.match("GET", "/v1/streams").upgrades());
  EXPECT_EQ(r.match("GET", "/v1/stream").dispatch(), Dispatch::kInline);
  HttpRequest req = request("GET", "/v1/stream");
  EXPECT_EQ(dispatch(r, req).body, "426") << "a request without Upgrade: the handler's answer";
  EXPECT_EQ(req.route, "/v1/stream");
}

TEST(Router, WithoutAnAuthenticatorNoRouteChecks) {
  Router r;
  r.add("GET", "/v1/tensors", tagged("list"));
  EXPECT_FALSE(r.match("GET", "/v1/tensors").authenticates());
  HttpRequest req = request("GET", "/v1/tensors");
  EXPECT_EQ(dispatch(r, req).body, "list");
}

TEST(Router, BadTemplatesAreRejected) {
  Router r;
  EXPECT_THROW(r.add("GET", "nope", tagged("x")), std::invalid_argument);
  EXPECT_THROW(r.add("GET", "/a/{b", tagged("x")), std::invalid_argument);
  EXPECT_THROW(r.add("GET", "/a/{}", tagged("x")), std::invalid_argument);
  EXPECT_THROW(r.add("GET", "/a/{b}{c}", tagged("x")), std::invalid_argument);
  EXPECT_THROW(r.add("GET", "/a/{b...}/{c...}", tagged("x")), std::invalid_argument);
  EXPECT_THROW(r.add("GET", "/a/b}", tagged("x")), std::invalid_argument);
  r.add("GET", "/a", tagged("x"));
  EXPECT_THROW(r.add("GET", "/a", tagged("y")), std::invalid_argument);
  EXPECT_EQ(r.size(), 1u);
}

// ---- request target parsing (server/request_target.h) ----

TEST(RequestTarget, DecodesPathAndQuery) {
  std::string path;
  std::map<std::string, std::string> query;
  parse_target("/v1/tensors/a%2Fb%20c?prefix=p%2F&x=1+2&flag&&y=", path, query);
  EXPECT_EQ(path, "/v1/tensors/a/b c");
  EXPECT_EQ(query.at("prefix"), "p/");
  EXPECT_EQ(query.at("x"), "1 2");
  EXPECT_EQ(query.at("flag"), "");
  EXPECT_EQ(query.at("y"), "");
  EXPECT_EQ(query.size(), 4u);
}

TEST(RequestTarget, PlusIsLiteralInPath) {
  std::string path;
  std::map<std::string, std::string> query;
  parse_target("/a+b", path, query);
  EXPECT_EQ(path, "/a+b");
  EXPECT_TRUE(query.empty());
}

TEST(RequestTarget, DotDotIsDecodedNotResolved) {
  std::string path;
  std::map<std::string, std::string> query;
  parse_target("/v1/tensors/%2e%2e/x", path, query);
  EXPECT_EQ(path, "/v1/tensors/../x");
}

TEST(RequestTarget, RejectsBadInput) {
  std::string path;
  std::map<std::string, std::string> query;
  for (const char* bad :
       {"/a%", "/a%2", "/a%zz", "/a%00b", "/a?x=%00", "/a?x=%g1", "a/b", "", "*", "http://h/a", "/a#frag"}) {
    try {
      parse_target(bad, path, query);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadRequest) << bad;
    }
  }
}

}  // namespace
}  // namespace tensord
