// What a config reload (SIGHUP) applies. Partitions are pinned threads (and
// green contexts on CUDA) sized by their share when the server starts, and
// cannot be moved safely under running jobs, so a reload keeps the running
// partition layout: partitions added or removed and changed shares are not
// applied (each is reported in `notes`), and a tenant stays on the partition
// it started on. Everything else applies: tenants added and removed, tokens,
// weights, memory quotas, max_queued, max_running, admin, and each
// partition's workqueue_limit. No JSON, no threads: a pure function.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "scheduler/config.h"

namespace tensord {

struct ReloadPlan {
  ServerConfig effective;          // the config to apply (valid)
  std::vector<std::string> notes;  // changes in the file that were not applied, and why
};

// `running`: the config in force. `next`: the file just read.
// `known_partitions`: the partition of every tenant the server has held
// (retired ones included: they come back on their partition).
// Throws Error(kBadRequest) when `next` is invalid (validate_config) or
// cannot be applied (a new tenant on a partition the running layout lacks).
ReloadPlan plan_reload(const ServerConfig& running, const ServerConfig& next,
                       const std::map<std::string, std::string>& known_partitions);

}  // namespace tensord
