// The trace ring behind GET /v1/trace (API.md section 9): a fixed-size ring
// of trace records rendered as Chrome trace-event JSON (the object format,
// which Perfetto and chrome://tracing open). Lanes (tids) are named threads:
// one per partition runner and one per request thread; their names are kept
// outside the ring so they never fall out of it.
// Thread-safe: one mutex around the ring (a record is a few strings; writers
// hold the lock for a move). Readers copy under the lock and render outside.
#pragma once

#include "metrics/json_escape.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace tensord {

struct TraceRecord {
  // 'X' complete span, 'b' async span (rendered as a b/e pair), 's' flow
  // start, 'f' flow end (binds to the enclosing slice).
  char ph = 'X';
  std::string name;
  std::string cat;
  int64_t ts_ns = 0;   // since TraceBuffer::epoch
  int64_t dur_ns = 0;  // 'X' and 'b'
  uint32_t tid = 0;    // lane
  uint64_t id = 0;     // 'b', 's', 'f'
  std::string tenant;  // who may see it; "" = admins only
  std::string args;    // a JSON object ("{...}") or empty
};

class TraceBuffer {
 public:
  static constexpr size_t kDefaultCapacity = 65536;

  // The process-wide ring (kDefaultCapacity records).
  static TraceBuffer& global();

  explicit TraceBuffer(size_t capacity = kDefaultCapacity);
  TraceBuffer(const TraceBuffer&) = delete;
  TraceBuffer& operator=(const TraceBuffer&) = delete;

  size_t capacity() const { return capacity_; }
  bool enabled() const { return capacity_ > 0; }
  // Nanoseconds since the process's trace epoch (steady clock).
  static int64_t now_ns();
  static int64_t ns_of(std::chrono::steady_clock::time_point t);

  // Appends, overwriting the oldest record when full.
  void add(TraceRecord r);
  // Records ever added (including those overwritten).
  uint64_t added() const;

  // The lane of the calling thread, named `name` on first use (later names
  // for the same thread are ignored). Cheap after the first call.
  uint32_t lane(const std::string& name);

  // The newest `last` records that `visible` accepts, oldest first.
  std::vector<TraceRecord> snapshot(size_t last, const std::function<bool(const TraceRecord&)>& visible) const;

  // {"traceEvents": [...], "displayTimeUnit": "ms"}: thread-name metadata
  // for every lane, then the newest `last` records visible to `tenant`
  // (every record when see_all).
  std::string render_json(size_t last, const std::string& tenant, bool see_all) const;

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::vector<TraceRecord> ring_;
  uint64_t next_ = 0;                    // records ever added; ring_[next_ % capacity_] is the next slot
  std::vector<std::string> lane_names_;  // index = tid - 1
};

// A request span on the calling thread, recorded when the scope ends (the
// HTTP session wraps each handler call). Holds references: `method` and
// `route` are read at the end (the router fills the route). Requests for
// health, metrics and trace routes are not recorded unless they submitted a job.
class TraceRequestScope {
 public:
  TraceRequestScope(const std::string& method, const std::string& route, const std::string& request_id);
  ~TraceRequestScope();
  TraceRequestScope(const TraceRequestScope&) = delete;
  TraceRequestScope& operator=(const TraceRequestScope&) = delete;

  // The scope of the calling thread, or nullptr.
  static TraceRequestScope* current();
  // The request submitted a job: its span belongs to `tenant`; a flow starts here.
  void add_job(const std::string& tenant, uint64_t flow_id, const std::string& job_id);
  uint32_t lane() const { return lane_; }

 private:
  const std::string& method_;
  const std::string& route_;
  const std::string& request_id_;
  int64_t start_ns_;
  uint32_t lane_;
  std::string tenant_;
  std::string jobs_;  // comma-separated
  TraceRequestScope* outer_;
};

}  // namespace tensord
