#include "scheduler/tenant_registry.h"

#include "ops/error.h"

namespace tensord {

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

TenantRegistry::TenantRegistry(const ServerConfig& config) : anonymous_(config.anonymous) {
  validate_config(config);
  auto snap = std::make_shared<Snapshot>();
  for (const auto& tc : config.tenants) {
    auto t = std::make_unique<Tenant>(tc);
    snap->tenants.push_back(t.get());
    snap->tokens.push_back(tc.token_sha256);
    snap->by_name[tc.name] = t.get();
    known_order_.push_back(t.get());
    known_[tc.name] = std::move(t);
  }
  if (anonymous_) default_ = snap->tenants.front();
  snap_ = std::move(snap);
}

std::shared_ptr<const TenantRegistry::Snapshot> TenantRegistry::snapshot() const {
  std::lock_guard<std::mutex> lk(mu_);
  return snap_;
}

Tenant* TenantRegistry::by_token_hash(const std::string& h) const {
  const auto snap = snapshot();
  Tenant* found = nullptr;
  for (size_t i = 0; i < snap->tenants.size(); ++i) {
    // Compare against every tenant; no early exit.
    bool eq = constant_time_equal(snap->tokens[i], h);
    if (eq && !snap->tokens[i].empty()) found = snap->tenants[i];
  }
  return found;
}

Tenant* TenantRegistry::by_name(const std::string& name) const {
  const auto snap = snapshot();
  auto it = snap->by_name.find(name);
  return it == snap->by_name.end() ? nullptr : it->second;
}

Tenant* TenantRegistry::default_tenant() const {
  return default_;  // set once; reload() refuses anonymous configs
}

std::vector<Tenant*> TenantRegistry::all() const {
  return snapshot()->tenants;
}

std::vector<Tenant*> TenantRegistry::all_with_retired() const {
  std::lock_guard<std::mutex> lk(mu_);
  return known_order_;
}

std::map<std::string, std::string> TenantRegistry::partitions_by_tenant() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::map<std::string, std::string> out;
  for (const auto& [name, t] : known_) out.emplace(name, t->partition);
  return out;
}

TenantRegistry::ReloadResult TenantRegistry::reload(const ServerConfig& next,
                                                    const std::function<void(Tenant&)>& on_new) {
  std::lock_guard<std::mutex> rl(reload_mu_);
  validate_config(next);
  if (anonymous_ || next.anonymous) {
    throw Error(ErrorCode::kBadRequest, "config: a server without --config (anonymous tenant) cannot reload");
  }
  const auto old = snapshot();
  // Check everything before changing anything.
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& tc : next.tenants) {
      auto it = known_.find(tc.name);
      if (it != known_.end() && it->second->partition != tc.partition) {
        throw Error(ErrorCode::kBadRequest, "config: tenant '" + tc.name + "' cannot move from partition '" +
                                                it->second->partition + "' to '" + tc.partition +
                                                "' without a restart");
      }
    }
  }
  ReloadResult res;
  // New tenants first (on_new may throw: then nothing has changed), then the
  // settings of known ones, then the snapshot swap that makes tokens live.
  std::map<std::string, std::unique_ptr<Tenant>> created;
  for (const auto& tc : next.tenants) {
    std::lock_guard<std::mutex> lk(mu_);
    if (known_.count(tc.name)) continue;
    created[tc.name] = std::make_unique<Tenant>(tc);
  }
  for (const auto& tc : next.tenants) {
    auto it = created.find(tc.name);
    if (it != created.end() && on_new) on_new(*it->second);
  }
  auto snap = std::make_shared<Snapshot>();
  for (const auto& tc : next.tenants) {
    Tenant* t = nullptr;
    if (auto it = created.find(tc.name); it != created.end()) {
      t = it->second.get();
      res.added.push_back(tc.name);
    } else {
      {
        std::lock_guard<std::mutex> lk(mu_);
        t = known_.at(tc.name).get();
      }
      if (!old->by_name.count(tc.name)) res.restored.push_back(tc.name);
      t->reconfigure(tc);
    }
    snap->tenants.push_back(t);
    snap->tokens.push_back(tc.token_sha256);
    snap->by_name[tc.name] = t;
  }
  for (const auto& [name, t] : old->by_name) {
    if (!snap->by_name.count(name)) res.removed.push_back(name);
  }
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& tc : next.tenants) {
    auto it = created.find(tc.name);
    if (it == created.end()) continue;
    known_order_.push_back(it->second.get());
    known_[tc.name] = std::move(it->second);
  }
  snap_ = std::move(snap);
  generation_.fetch_add(1, std::memory_order_release);
  return res;
}

}  // namespace tensord
