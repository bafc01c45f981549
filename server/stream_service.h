// What a GET /v1/stream WebSocket talks to (API.md section 9): who is
// asking (the same Bearer auth as HTTP) and the "metrics" snapshot of the
// moment, filtered to what that tenant may see. Job events come from
// EventBus::global(). No Beast here. Thread-safe (reads only).
#pragma once

#include <chrono>
#include <string>

#include "api/http_types.h"
#include "api/stream_json.h"

namespace tensord {

class Engine;
class TenantRegistry;

struct StreamViewer {
  std::string tenant;
  bool see_all = false;  // admins, and the anonymous tenant without --config
};

class StreamService {
 public:
  StreamService(Engine* engine, TenantRegistry* tenants);

  // Throws Error(kUnauthenticated) like every authenticated route.
  StreamViewer authenticate(const HttpRequest& req) const;
  // The server now, as `viewer` may see it (api/stream_json.h encodes it).
  MetricsSnapshot metrics_snapshot(const StreamViewer& viewer) const;

 private:
  Engine* engine_;
  TenantRegistry* tenants_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace tensord
