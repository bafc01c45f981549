#include "api/config_json.h"

#include <gtest/gtest.h>

#include "api/sha256.h"
#include "ops/error.h"
#include "scheduler/tenant_registry.h"

namespace tensord {
namespace {

std::string cfg(const std::string& tenants_extra = "", const std::string& top_extra = "") {
  return R"({"partitions": [{"name": "p", "share": 0.5, "workqueue_limit": 3}],
             "tenants": [{"name": "a", "token_sha256": ")" +
         sha256_hex("tok-a") + R"(", "partition": "p", "weight": 2, "memory_bytes": 100)" + tenants_extra + R"(}])" +
         top_extra + "}";
}

TEST(ConfigJson, ParsesTheApiExample) {
  ServerConfig c = config_from_json(cfg(R"(, "max_queued": 5, "max_running": 1, "admin": true)"));
  ASSERT_EQ(c.partitions.size(), 1u);
  EXPECT_EQ(c.partitions[0].workqueue_limit, 3);
  ASSERT_EQ(c.tenants.size(), 1u);
  EXPECT_EQ(c.tenants[0].weight, 2);
  EXPECT_EQ(c.tenants[0].memory_bytes, 100);
  EXPECT_EQ(c.tenants[0].max_queued, 5);
  EXPECT_TRUE(c.tenants[0].admin);
  EXPECT_FALSE(c.anonymous);
}

TEST(ConfigJson, RejectsMistakes) {
  for (const std::string& bad :
       {std::string("[]"), std::string("{}"), cfg(R"(, "x": 1)"), cfg("", R"(, "y": [])"), cfg(R"(, "admin": 1)"),
        cfg(R"(, "max_running": 0)"), cfg(R"(, "weight": 0)"), std::string(R"({"partitions": [], "tenants": []})")}) {
    try {
      config_from_json(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
      EXPECT_EQ(e.message().rfind("config:", 0), 0u) << e.message();
    }
  }
  EXPECT_THROW(load_config_file("/nonexistent/tensord.json"), Error);
}

TEST(TenantRegistry, TokenLookupAndDefault) {
  TenantRegistry reg(config_from_json(cfg()));
  EXPECT_FALSE(reg.anonymous());
  EXPECT_EQ(reg.default_tenant(), nullptr);
  Tenant* a = reg.by_token_hash(sha256_hex("tok-a"));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->name, "a");
  EXPECT_EQ(a->account->limit(), 100);
  EXPECT_EQ(reg.by_token_hash(sha256_hex("tok-b")), nullptr);
  EXPECT_EQ(reg.by_token_hash(""), nullptr);
  TenantRegistry anon(default_config(2));
  ASSERT_NE(anon.default_tenant(), nullptr);
  EXPECT_EQ(anon.default_tenant()->name, "default");
  EXPECT_EQ(anon.by_token_hash(""), nullptr) << "the anonymous tenant has no token";
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
}

}  // namespace
}  // namespace tensord
