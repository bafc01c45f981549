#include "metrics/trace_buffer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace tensord {
namespace {

std::chrono::steady_clock::time_point epoch() {
  static const auto t0 = std::chrono::steady_clock::now();
  return t0;
}

// Microseconds with nanosecond precision: "1234.567".
void append_us(std::string& out, int64_t ns) {
  if (ns < 0) ns = 0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000), static_cast<long long>(ns % 1000));
  out += buf;
}

void append_common(std::string& out, const TraceRecord& r, char ph, int64_t ts_ns) {
  out += "{\"name\":\"";
  out += json_escape(r.name);
  out += "\",\"cat\":\"";
  out += json_escape(r.cat);
  out += "\",\"ph\":\"";
  out += ph;
  out += "\",\"ts\":";
  append_us(out, ts_ns);
  out += ",\"pid\":1,\"tid\":";
  out += std::to_string(r.tid);
}

void append_record(std::string& out, const TraceRecord& r, bool& first) {
  auto sep = [&] {
    if (!first) out += ',';
    first = false;
  };
  switch (r.ph) {
    case 'X':
      sep();
      append_common(out, r, 'X', r.ts_ns);
      out += ",\"dur\":";
      append_us(out, r.dur_ns);
      break;
    case 'b':
      sep();
      append_common(out, r, 'b', r.ts_ns);
      out += ",\"id\":\"0x";
      {
        char buf[24];
        std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(r.id));
        out += buf;
        out += '"';
        if (!r.args.empty()) out += ",\"args\":" + r.args;
        out += "},";
        append_common(out, r, 'e', r.ts_ns + r.dur_ns);
        out += ",\"id\":\"0x";
        out += buf;
        out += '"';
      }
      out += '}';
      return;
    case 's':
    case 'f':
      sep();
      append_common(out, r, r.ph, r.ts_ns);
      out += ",\"id\":" + std::to_string(r.id);
      if (r.ph == 'f') out += ",\"bp\":\"e\"";
      break;
    default:
      return;
  }
  if (!r.args.empty()) out += ",\"args\":" + r.args;
  out += '}';
}

thread_local TraceRequestScope* tls_scope = nullptr;

struct LaneCache {
  const TraceBuffer* owner = nullptr;
  uint32_t tid = 0;
};
thread_local LaneCache tls_lane;

}  // namespace

TraceBuffer& TraceBuffer::global() {
  // Leaked on purpose: runner threads may trace during exit.
  static auto* buffer = new TraceBuffer(kDefaultCapacity);
  return *buffer;
}

TraceBuffer::TraceBuffer(size_t capacity) : capacity_(capacity) {
  epoch();
  ring_.reserve(std::min<size_t>(capacity_, 1024));
}

int64_t TraceBuffer::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - epoch()).count();
}

int64_t TraceBuffer::ns_of(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - epoch()).count();
}

void TraceBuffer::add(TraceRecord r) {
  if (capacity_ == 0) return;
  std::lock_guard lock(mu_);
  if (ring_.size() < capacity_) {
    ring_.push_back(std::move(r));
  } else {
    ring_[next_ % capacity_] = std::move(r);
  }
  ++next_;
}

uint64_t TraceBuffer::added() const {
  std::lock_guard lock(mu_);
  return next_;
}

uint32_t TraceBuffer::lane(const std::string& name) {
  if (tls_lane.owner == this) return tls_lane.tid;
  std::lock_guard lock(mu_);
  lane_names_.push_back(name + " #" + std::to_string(lane_names_.size() + 1));
  tls_lane.owner = this;
  tls_lane.tid = static_cast<uint32_t>(lane_names_.size());
  return tls_lane.tid;
}

std::vector<TraceRecord> TraceBuffer::snapshot(size_t last,
                                               const std::function<bool(const TraceRecord&)>& visible) const {
  std::vector<TraceRecord> out;
  std::lock_guard lock(mu_);
  const size_t n = ring_.size();
  // Newest first, then reversed: `last` bounds the visible records kept.
  for (size_t k = 0; k < n && out.size() < last; ++k) {
    const TraceRecord& r = ring_[(next_ - 1 - k) % capacity_];
    if (!visible || visible(r)) out.push_back(r);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::string TraceBuffer::render_json(size_t last, const std::string& tenant, bool see_all) const {
  auto records =
      snapshot(last, [&](const TraceRecord& r) { return see_all || (!tenant.empty() && r.tenant == tenant); });
  std::vector<std::string> lanes;
  {
    std::lock_guard lock(mu_);
    lanes = lane_names_;
  }
  std::string out = "{\"traceEvents\":[";
  out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"tensord\"}}";
  for (size_t i = 0; i < lanes.size(); ++i) {
    out += ",{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + std::to_string(i + 1) +
           ",\"args\":{\"name\":\"" + json_escape(lanes[i]) + "\"}}";
  }
  bool first = false;
  for (const auto& r : records) append_record(out, r, first);
  out += "],\"displayTimeUnit\":\"ms\"}";
  return out;
}

// ---------------------------------------------------------------- request scope

TraceRequestScope::TraceRequestScope(const std::string& method, const std::string& route, const std::string& request_id)
    : method_(method),
      route_(route),
      request_id_(request_id),
      start_ns_(TraceBuffer::now_ns()),
      lane_(0),
      outer_(tls_scope) {
  tls_scope = this;
}

TraceRequestScope::~TraceRequestScope() {
  tls_scope = outer_;
  TraceBuffer& tb = TraceBuffer::global();
  if (!tb.enabled()) return;
  const std::string& r = route_;
  bool quiet = r.empty() || r == "/metrics" || r == "/healthz" || r == "/readyz" || r.rfind("/v2/health", 0) == 0 ||
               r == "/v1/trace" || r == "/v1/stream";
  if (quiet && jobs_.empty()) return;
  TraceRecord rec;
  rec.ph = 'X';
  rec.name = method_ + " " + (r.empty() ? std::string("unmatched") : r);
  rec.cat = "request";
  rec.ts_ns = start_ns_;
  rec.dur_ns = TraceBuffer::now_ns() - start_ns_;
  rec.tid = lane_ ? lane_ : tb.lane("request thread");
  rec.tenant = tenant_;
  rec.args = "{\"request_id\":\"" + json_escape(request_id_) + "\"";
  if (!jobs_.empty()) rec.args += ",\"jobs\":\"" + json_escape(jobs_) + "\"";
  rec.args += "}";
  tb.add(std::move(rec));
}

TraceRequestScope* TraceRequestScope::current() {
  return tls_scope;
}

void TraceRequestScope::add_job(const std::string& tenant, uint64_t flow_id, const std::string& job_id) {
  TraceBuffer& tb = TraceBuffer::global();
  if (!tb.enabled()) return;
  tenant_ = tenant;
  if (!jobs_.empty()) jobs_ += ",";
  jobs_ += job_id;
  if (!lane_) lane_ = tb.lane("request thread");
  TraceRecord f;
  f.ph = 's';
  f.name = "job";
  f.cat = "flow";
  f.ts_ns = std::max(start_ns_, TraceBuffer::now_ns());
  f.tid = lane_;
  f.id = flow_id;
  f.tenant = tenant;
  tb.add(std::move(f));
}

}  // namespace tensord
