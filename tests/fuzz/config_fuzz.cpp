// libFuzzer target: the --config parser (api/config_json.*, API.md 9) and
// what a SIGHUP does with a parsed file (scheduler/config_reload.h, the
// TenantRegistry reload).
// Input: the config file's text.
// Invariants: parsing fails only with bad_request; a config it accepts is
// valid (validate_config), builds a TenantRegistry that finds every tenant by
// name and by token hash; planning its reload over a running config (that of
// docker/config.example.json) fails only with bad_request, and a plan's
// effective config is valid and applies to that running registry.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "api/config_json.h"
#include "scheduler/config.h"
#include "scheduler/config_reload.h"
#include "scheduler/tenant_registry.h"
#include "tests/fuzz/fuzz_util.h"

namespace tensord::fuzz {
namespace {

// docker/config.example.json
constexpr std::string_view kRunning = R"({
  "partitions": [{"name": "interactive", "share": 0.25, "workqueue_limit": 4},
                 {"name": "batch", "share": 0.75, "workqueue_limit": 16}],
  "tenants": [
    {"name": "admin", "token_sha256": "8c6976e5b5410415bde908bd4dee15dfb167a9c873fc4bb8a81f6f2ab448a918",
     "partition": "batch", "admin": true},
    {"name": "alice", "token_sha256": "2bd806c97f0e00af1a1fc3328fa763a9269723c8db8fac4f93af71db186d6e90",
     "partition": "interactive", "weight": 1, "memory_bytes": 1073741824, "max_queued": 64, "max_running": 4}
  ]
})";

void check_registry(const TenantRegistry& reg, const ServerConfig& c) {
  check(reg.anonymous() == c.anonymous, "registry anonymity differs from the config");
  check(reg.all().size() == c.tenants.size(), "registry holds another number of tenants than the config");
  for (const auto& t : c.tenants) {
    Tenant* by_name = reg.by_name(t.name);
    check(by_name != nullptr && by_name->name == t.name, "tenant '" + t.name + "' not found by name");
    check(by_name->partition == t.partition, "tenant '" + t.name + "' is on another partition");
    if (!t.token_sha256.empty()) {
      check(reg.by_token_hash(t.token_sha256) == by_name, "tenant '" + t.name + "' not found by its token hash");
    }
  }
}

}  // namespace
}  // namespace tensord::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensord;
  using namespace tensord::fuzz;
  static const ServerConfig running = config_from_json(kRunning);
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  ServerConfig c;
  if (!expect_ok_or({ErrorCode::kBadRequest}, "config_from_json", [&] { c = config_from_json(text); })) return 0;
  expect_no_throw("validate_config of a parsed config", [&] { validate_config(c); });
  expect_no_throw("TenantRegistry of a parsed config", [&] {
    TenantRegistry reg(c);
    check_registry(reg, c);
  });

  // SIGHUP with this file over the example config.
  TenantRegistry live(running);
  ReloadPlan plan;
  if (!expect_ok_or({ErrorCode::kBadRequest}, "plan_reload",
                    [&] { plan = plan_reload(running, c, live.partitions_by_tenant()); })) {
    return 0;
  }
  expect_no_throw("validate_config of a reload plan", [&] { validate_config(plan.effective); });
  expect_no_throw("TenantRegistry::reload of a reload plan", [&] {
    live.reload(plan.effective);
    check_registry(live, plan.effective);
  });
  return 0;
}
