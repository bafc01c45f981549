// The embedded OpenAPI spec (api/openapi.yaml) against the routes the
// server registers (build_router): every spec operation must be a route
// of that method and template, and the spec must have as many operations
// as the router has routes, so a route added without a spec entry fails
// here. Each operation's security must also be what the handler does: a
// call without a token is 401 exactly when the spec asks for a token.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ops/error.h"
#include "scheduler/config.h"
#include "scheduler/tenant_registry.h"
#include "server/app.h"
#include "server/routes_openapi.h"
#include "server/shm_registry.h"

namespace tensord {
namespace {

struct SpecOp {
  std::string method;  // upper case
  std::string path;    // the spec's template, e.g. /v1/tensors/{name}
  bool needs_token = true;
};

std::vector<SpecOp> spec_ops(const rapidjson::Document& d) {
  const bool global_security = d.HasMember("security") && d["security"].IsArray() && !d["security"].Empty();
  std::vector<SpecOp> ops;
  for (const auto& path : d["paths"].GetObject()) {
    for (const auto& item : path.value.GetObject()) {
      std::string method = item.name.GetString();
      if (method == "parameters" || method == "summary" || method == "description") continue;
      std::transform(method.begin(), method.end(), method.begin(), [](unsigned char c) { return std::toupper(c); });
      SpecOp op{method, path.name.GetString(), global_security};
      if (item.value.HasMember("security")) op.needs_token = !item.value["security"].Empty();
      ops.push_back(op);
    }
  }
  return ops;
}

// A concrete path for a template: each {param} becomes a value that is
// not a literal of any route ("a/b" for the tensor name, which may hold '/').
std::string concrete(const std::string& tmpl) {
  std::string out;
  for (size_t i = 0; i < tmpl.size();) {
    if (tmpl[i] != '{') {
      out += tmpl[i++];
      continue;
    }
    size_t close = tmpl.find('}', i);
    const std::string name = tmpl.substr(i + 1, close - i - 1);
    out += name == "name" ? "p1/q2" : "x1";
    i = close + 1;
  }
  return out;
}

// Runs an asynchronous route's answer at once, on this thread.
class InlineReply : public AsyncReply {
 public:
  void finish(bool, std::function<HttpResponse()> make) override { response = make(); }
  void on_client_gone(std::function<void()>) override {}
  std::optional<HttpResponse> response;
};

class OpenApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerConfig cfg;
    cfg.partitions.push_back(PartitionSpec{"p", 1.0, 1});
    TenantSpec t;
    t.name = "alice";
    t.partition = "p";
    t.token_sha256 = std::string(64, 'a');
    cfg.tenants.push_back(t);
    tenants = std::make_unique<TenantRegistry>(cfg);
    app.tenants = tenants.get();
    app.shm = &shm;                      // the system shared memory routes are registered with it
    app.draining = [] { return true; };  // /readyz answers before it needs an engine
    router = build_router(app);
    ASSERT_FALSE(doc.Parse(openapi_json().data(), openapi_json().size()).HasParseError());
    ops = spec_ops(doc);
  }

  // What the route answers without a token: its status, or the status of
  // the Error its handler throws.
  int status_without_token(const SpecOp& op) {
    HttpRequest req;
    req.method = op.method;
    req.path = concrete(op.path);
    req.target = req.path;
    req.request_id = "rid";
    RouteMatch m = router->match(req.method, req.path);
    try {
      if (m.dispatch() == Dispatch::kInline) return m.call(req).status;
      auto reply = std::make_shared<InlineReply>();
      m.call_async(req, reply);
      return reply->response ? reply->response->status : -1;
    } catch (const Error& e) {
      return e.code() == ErrorCode::kUnauthenticated ? 401 : e.code() == ErrorCode::kUnavailable ? 503 : 0;
    }
  }

  std::unique_ptr<TenantRegistry> tenants;
  ShmRegistry shm;
  AppContext app;
  std::shared_ptr<Router> router;
  rapidjson::Document doc;
  std::vector<SpecOp> ops;
};

TEST_F(OpenApiTest, IsOpenApi31WithABearerScheme) {
  ASSERT_TRUE(doc.IsObject());
  ASSERT_TRUE(doc.HasMember("openapi") && doc["openapi"].IsString());
  EXPECT_EQ(std::string(doc["openapi"].GetString()).rfind("3.1.", 0), 0u);
  const auto& schemes = doc["components"]["securitySchemes"];
  ASSERT_TRUE(schemes.HasMember("bearerAuth"));
  EXPECT_STREQ(schemes["bearerAuth"]["scheme"].GetString(), "bearer");
  // API.md 2's error shape is one shared schema.
  const auto& err = doc["components"]["schemas"]["Error"]["properties"]["error"];
  EXPECT_TRUE(err["properties"].HasMember("code"));
  EXPECT_TRUE(err["properties"].HasMember("message"));
}

TEST_F(OpenApiTest, EverySpecOperationIsARouteOfThatMethodAndTemplate) {
  ASSERT_FALSE(ops.empty());
  std::set<std::string> seen;
  for (const auto& op : ops) {
    SCOPED_TRACE(op.method + " " + op.path);
    EXPECT_TRUE(seen.insert(op.method + " " + op.path).second) << "listed twice";
    RouteMatch m = router->match(op.method, concrete(op.path));
    ASSERT_EQ(m.route(), op.path) << "the server has no route with this template";
    // A known path with another method answers 405 (without a handler):
    // the method must be one the route has.
    if (m.dispatch() == Dispatch::kInline) {
      HttpRequest req;
      req.method = op.method;
      req.path = concrete(op.path);
      req.request_id = "rid";
      int status = 0;
      try {
        status = m.call(req).status;
      } catch (const Error&) {
        status = 0;  // the handler ran (and refused): the method is right
      }
      EXPECT_NE(status, 405) << "the server has this path but not this method";
    }
  }
}

TEST_F(OpenApiTest, EveryRegisteredRouteHasASpecEntry) {
  // Each spec operation matched a distinct route (the test above), so equal
  // counts mean no registered route is missing from the spec.
  EXPECT_EQ(ops.size(), router->size()) << "a route was registered (server/routes_*.cpp) without an entry in "
                                           "api/openapi.yaml, or the spec lists one twice";
}

TEST_F(OpenApiTest, SecurityIsWhatTheHandlersDo) {
  for (const auto& op : ops) {
    SCOPED_TRACE(op.method + " " + op.path);
    const int status = status_without_token(op);
    if (op.needs_token) {
      EXPECT_EQ(status, 401) << "the spec asks for a token, the server does not";
    } else {
      EXPECT_NE(status, 401) << "the spec says no token, the server asks for one";
    }
  }
}

TEST_F(OpenApiTest, EveryOperationDocumentsItsResponses) {
  for (const auto& path : doc["paths"].GetObject()) {
    for (const auto& item : path.value.GetObject()) {
      if (!item.value.IsObject() || !item.value.HasMember("responses")) continue;
      SCOPED_TRACE(std::string(item.name.GetString()) + " " + path.name.GetString());
      const auto& responses = item.value["responses"];
      EXPECT_FALSE(responses.HasMember("default")) << "statuses are listed one by one, so schemathesis checks them";
      bool success = false;
      for (const auto& r : responses.GetObject())
        success = success || r.name.GetString()[0] == '1' || r.name.GetString()[0] == '2';
      // load/unload always refuse (models are captured through /v1/graphs).
      if (!std::string(path.name.GetString()).starts_with("/v2/repository/models/")) {
        EXPECT_TRUE(success) << "no success response";
      }
    }
  }
}

}  // namespace
}  // namespace tensord
