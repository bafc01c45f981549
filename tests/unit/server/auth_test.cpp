// Who sent a request (server/auth.h, server/caller.h): the token looked up
// once into a Caller (tenant, lane, account, or why none), and
// authenticate() answering from what the session resolved.
#include "server/auth.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "api/sha256.h"
#include "ops/error.h"
#include "scheduler/config.h"
#include "scheduler/tenant.h"
#include "scheduler/tenant_registry.h"

namespace tensord {
namespace {

ServerConfig two_tenants() {
  ServerConfig c;
  c.partitions.push_back(PartitionSpec{"pa", 0.5, 2});
  c.partitions.push_back(PartitionSpec{"pb", 0.5, 2});
  TenantSpec a;
  a.name = "alice";
  a.partition = "pa";
  a.token_sha256 = sha256_hex("tok-a");
  TenantSpec b = a;
  b.name = "bob";
  b.partition = "pb";
  b.token_sha256 = sha256_hex("tok-b");
  c.tenants = {a, b};
  return c;
}

HttpRequest with_header(const std::string& authorization) {
  HttpRequest req;
  if (!authorization.empty()) req.headers["authorization"] = authorization;
  return req;
}

std::string unauthenticated_message(const HttpRequest& req, const TenantRegistry& reg) {
  try {
    authenticate(req, reg);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnauthenticated);
    return e.message();
  }
  ADD_FAILURE() << "expected 401";
  return {};
}

TEST(ResolveCaller, ATokenNamesItsTenantItsLaneAndItsAccount) {
  TenantRegistry reg(two_tenants());
  Caller c = resolve_caller("Bearer tok-b", reg);
  ASSERT_NE(c.tenant, nullptr);
  EXPECT_EQ(c.tenant->name, "bob");
  EXPECT_EQ(c.lane, "pb");
  EXPECT_EQ(c.account, c.tenant->account);
  EXPECT_TRUE(c.why.empty());
  EXPECT_EQ(resolve_caller("bearer   tok-a", reg).lane, "pa") << "scheme case and spaces as before";
}

TEST(ResolveCaller, NoTenantSaysWhyAndHoldsNothing) {
  TenantRegistry reg(two_tenants());
  for (const auto& [header, why] : std::initializer_list<std::pair<std::string, std::string>>{
           {"", "missing Authorization: Bearer <token>"},
           {"Basic dXNlcg==", "Authorization must use the Bearer scheme"},
           {"Bearer ", "malformed Authorization header"},
           {"Bearer nope", "unknown token"}}) {
    Caller c = resolve_caller(header, reg);
    EXPECT_EQ(c.tenant, nullptr) << header;
    EXPECT_EQ(c.why, why) << header;
    EXPECT_TRUE(c.lane.empty()) << header;
    EXPECT_EQ(c.account, nullptr) << header;
  }
}

TEST(Authenticate, ReadsTheCallerTheSessionResolvedNotTheHeaderAgain) {
  TenantRegistry reg(two_tenants());
  HttpRequest req = with_header("Bearer tok-a");
  req.who = std::make_shared<const Caller>(resolve_caller("Bearer tok-b", reg));
  EXPECT_EQ(authenticate(req, reg).name, "bob") << "what the headers named when they were read";
  EXPECT_EQ(*req.caller, "bob") << "the log line's tenant";

  HttpRequest none = with_header("Bearer tok-a");
  none.who = std::make_shared<const Caller>(resolve_caller("Bearer nope", reg));
  EXPECT_EQ(unauthenticated_message(none, reg), "unknown token");
  EXPECT_TRUE(none.caller->empty());
}

TEST(Authenticate, WithoutASessionItLooksTheHeaderUp) {
  TenantRegistry reg(two_tenants());
  EXPECT_EQ(authenticate(with_header("Bearer tok-a"), reg).name, "alice");
  EXPECT_EQ(unauthenticated_message(with_header(""), reg), "missing Authorization: Bearer <token>");
  EXPECT_EQ(unauthenticated_message(with_header("Bearer tok-c"), reg), "unknown token");
}

TEST(Authenticate, AReloadThatRemovesTheTenantStopsItsNextRequestNotOneAlreadyResolved) {
  TenantRegistry reg(two_tenants());
  HttpRequest resolved = with_header("Bearer tok-b");
  resolved.who = std::make_shared<const Caller>(resolve_caller("Bearer tok-b", reg));
  ServerConfig next = two_tenants();
  next.tenants.pop_back();  // bob goes
  reg.reload(next);
  EXPECT_EQ(authenticate(resolved, reg).name, "bob") << "authenticated as of its headers";
  EXPECT_EQ(resolve_caller("Bearer tok-b", reg).tenant, nullptr) << "the next request is not";
}

}  // namespace
}  // namespace tensord
