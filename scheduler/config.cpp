#include "scheduler/config.h"

#include <cctype>
#include <set>

#include "ops/error.h"

namespace tensord {

namespace {
[[noreturn]] void bad(const std::string& msg) {
  throw Error(ErrorCode::kBadRequest, "config: " + msg);
}

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  }
  return true;
}
}  // namespace

ServerConfig default_config(int workqueue_limit) {
  ServerConfig c;
  c.anonymous = true;
  c.partitions.push_back(PartitionSpec{"default", 1.0, workqueue_limit});
  TenantSpec t;
  t.name = "default";
  t.partition = "default";
  t.max_queued = 1024;
  t.max_running = workqueue_limit;
  c.tenants.push_back(t);
  return c;
}

void validate_config(const ServerConfig& c) {
  if (c.partitions.empty()) bad("at least one partition is needed");
  if (c.tenants.empty()) bad("at least one tenant is needed");
  std::set<std::string> parts;
  double total = 0;
  for (const auto& p : c.partitions) {
    if (!valid_name(p.name)) bad("partition name '" + p.name + "' must be 1..64 of [A-Za-z0-9_.-]");
    if (!parts.insert(p.name).second) bad("duplicate partition '" + p.name + "'");
    if (!(p.share > 0 && p.share <= 1)) bad("partition '" + p.name + "': share must be in (0, 1]");
    if (p.workqueue_limit < 1 || p.workqueue_limit > 4096) {
      bad("partition '" + p.name + "': workqueue_limit must be in 1..4096");
    }
    total += p.share;
  }
  if (total > 1.0 + 1e-9) bad("partition shares sum to " + std::to_string(total) + ", more than 1");
  std::set<std::string> names, tokens;
  for (const auto& t : c.tenants) {
    if (!valid_name(t.name)) bad("tenant name '" + t.name + "' must be 1..64 of [A-Za-z0-9_.-]");
    if (!names.insert(t.name).second) bad("duplicate tenant '" + t.name + "'");
    if (!parts.count(t.partition)) bad("tenant '" + t.name + "': unknown partition '" + t.partition + "'");
    if (!(t.weight > 0 && t.weight <= 1e6)) bad("tenant '" + t.name + "': weight must be in (0, 1e6]");
    if (t.memory_bytes < 0) bad("tenant '" + t.name + "': memory_bytes must be >= 0");
    if (t.max_queued < 0) bad("tenant '" + t.name + "': max_queued must be >= 0");
    if (t.max_running < 1) bad("tenant '" + t.name + "': max_running must be >= 1");
    if (!c.anonymous) {
      bool hex = t.token_sha256.size() == 64;
      for (char ch : t.token_sha256)
        hex = hex && std::isxdigit(static_cast<unsigned char>(ch)) && !std::isupper(static_cast<unsigned char>(ch));
      if (!hex) bad("tenant '" + t.name + "': token_sha256 must be 64 lower-case hex digits");
      if (!tokens.insert(t.token_sha256).second)
        bad("tenant '" + t.name + "': token_sha256 is shared with another tenant");
    }
  }
}

}  // namespace tensord
