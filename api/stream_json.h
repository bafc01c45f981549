// The messages of GET /v1/stream (API.md 9; the schema is in
// docs/api-notes.md): the client's subscribe request in, and out the
// "subscribed" answer, metrics snapshots, job events and errors.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/event_bus.h"

namespace tensord {

struct StreamSubscription {
  bool metrics = false;
  bool jobs = false;
  int interval_ms = 0;
};

// {"subscribe": ["metrics"|"jobs", ...], "interval_ms"?: N}; interval_ms is
// clamped to [min_ms, max_ms], default_ms when absent. Throws
// Error(kBadRequest) naming the problem.
StreamSubscription stream_subscription_from_json(std::string_view text, int default_ms, int min_ms, int max_ms);

// {"type": "subscribed", "streams": [...], "interval_ms"}.
std::string stream_subscribed_to_json(const StreamSubscription& s);

// {"type": "error", "error": {"code": "bad_request", "message"}}.
std::string stream_error_to_json(const std::string& message);

// {"type": "job", "id", "state", "tenant", "partition", "queue_ms", "run_ms"}.
std::string job_event_to_json(const JobStateEvent& e);

// What one viewer may see of the server at one moment.
struct MetricsSnapshot {
  struct Partition {
    std::string name;
    int inflight = 0;
    int limit = 0;
    int64_t queued = 0;
    double busy_seconds = 0;
  };
  struct Tenant {
    std::string name;
    std::string partition;
    int64_t queued = 0;
    int running = 0;
    double busy_seconds = 0;
    std::optional<int64_t> memory_bytes, memory_limit_bytes;
  };
  double time = 0;  // seconds since the Unix epoch
  double uptime_s = 0;
  std::optional<std::map<std::string, int64_t>> requests;  // HTTP requests by status code (admins only)
  std::vector<Partition> partitions;
  std::vector<Tenant> tenants;
  int64_t jobs_queued = 0, jobs_running = 0;
  int64_t jobs_succeeded = 0, jobs_failed = 0, jobs_cancelled = 0;
};

// {"type": "metrics", "time", "uptime_s", "requests"?, "partitions",
// "tenants", "jobs": {"queued", "running", "succeeded", "failed", "cancelled"}}.
std::string metrics_snapshot_to_json(const MetricsSnapshot& s);

}  // namespace tensord
