#include "scheduler/tenant_registry.h"

namespace tensord {

bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

TenantRegistry::TenantRegistry(const ServerConfig& config) : anonymous_(config.anonymous) {
  validate_config(config);
  for (const auto& tc : config.tenants) {
    auto t = std::make_unique<Tenant>(tc);
    by_name_[tc.name] = t.get();
    tenants_.push_back(std::move(t));
  }
}

Tenant* TenantRegistry::by_token_hash(const std::string& h) const {
  Tenant* found = nullptr;
  for (const auto& t : tenants_) {
    // Compare against every tenant; no early exit.
    bool eq = constant_time_equal(t->config.token_sha256, h);
    if (eq && !t->config.token_sha256.empty()) found = t.get();
  }
  return found;
}

Tenant* TenantRegistry::by_name(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Tenant* TenantRegistry::default_tenant() const {
  return anonymous_ ? tenants_.front().get() : nullptr;
}

std::vector<Tenant*> TenantRegistry::all() const {
  std::vector<Tenant*> out;
  for (const auto& t : tenants_) out.push_back(t.get());
  return out;
}

}  // namespace tensord
