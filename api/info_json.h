// GET /v1/info (API.md 9) and the health routes' bodies.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/backend.h"
#include "scheduler/scheduler_types.h"

namespace tensord {

struct ServerInfo {
  struct Partition {
    std::string name;
    double share = 1.0;
    int workqueue_limit = 0;
    std::optional<SchedulerStats::Partition> stats;  // inflight, queued, threads, cpus (absent: not running)
  };
  std::string version;
  std::string backend;
  std::vector<std::string> compiled_backends;
  std::map<std::string, std::string> libraries;
  std::vector<DeviceInfo> devices;
  std::vector<Partition> partitions;
  // API.md 8: this server's local ranks, the world's and its first rank.
  int ranks_local = 1, ranks_world = 1, rank_offset = 0;
  uint64_t max_body_bytes = 0;
  double uptime_s = 0;
};

// {"name": "tensord", "version", "api": "v1", "backend", "compiled_backends",
//  "libraries", "devices", "ranks", "partitions", "max_body_bytes", "uptime_s"}.
std::string server_info_to_json(const ServerInfo& info);

// {"status": "<status>"}: /healthz, /readyz.
std::string health_to_json(std::string_view status);

}  // namespace tensord
