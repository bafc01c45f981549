#include "scheduler/config_reload.h"

#include <sstream>

#include "ops/error.h"

namespace tensord {

namespace {
const PartitionSpec* find_partition(const ServerConfig& c, const std::string& name) {
  for (const auto& p : c.partitions) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string fmt_share(double s) {
  std::ostringstream o;
  o << s;
  return o.str();
}
}  // namespace

ReloadPlan plan_reload(const ServerConfig& running, const ServerConfig& next,
                       const std::map<std::string, std::string>& known_partitions) {
  validate_config(next);
  if (running.anonymous) throw Error(ErrorCode::kBadRequest, "config: the server runs without --config; restart it");
  ReloadPlan plan;
  plan.effective.anonymous = false;
  // The layout stays; only workqueue limits follow the file.
  for (const auto& p : running.partitions) {
    PartitionSpec eff = p;
    if (const PartitionSpec* n = find_partition(next, p.name)) {
      eff.workqueue_limit = n->workqueue_limit;
      if (n->share != p.share) {
        plan.notes.push_back("partition '" + p.name + "': share " + fmt_share(n->share) + " not applied, keeping " +
                             fmt_share(p.share) + " (partition layout changes need a restart)");
      }
    } else {
      plan.notes.push_back("partition '" + p.name +
                           "' is gone from the file but kept (partition layout changes need a restart)");
    }
    plan.effective.partitions.push_back(eff);
  }
  for (const auto& p : next.partitions) {
    if (!find_partition(running, p.name)) {
      plan.notes.push_back("partition '" + p.name + "' not added (partition layout changes need a restart)");
    }
  }
  for (const auto& t : next.tenants) {
    TenantSpec eff = t;
    auto known = known_partitions.find(t.name);
    if (known != known_partitions.end() && known->second != t.partition) {
      plan.notes.push_back("tenant '" + t.name + "': stays on partition '" + known->second + "', not moved to '" +
                           t.partition + "' (partition changes need a restart)");
      eff.partition = known->second;
    }
    if (!find_partition(plan.effective, eff.partition)) {
      throw Error(ErrorCode::kBadRequest, "config: tenant '" + t.name + "': partition '" + eff.partition +
                                              "' is not in the running layout (partition changes need a restart)");
    }
    plan.effective.tenants.push_back(std::move(eff));
  }
  validate_config(plan.effective);
  return plan;
}

}  // namespace tensord
