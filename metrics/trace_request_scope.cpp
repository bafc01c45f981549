#include "metrics/trace_request_scope.h"

#include <array>
#include <string>

#include "metrics/trace_buffer.h"

namespace tensord {
namespace {

thread_local TraceRequestScope* tls_scope = nullptr;

// The request name ("POST /v1/run") as an interned id, cached per thread by
// (method, route): the route strings are the router's templates.
struct RequestNameCacheEntry {
  std::string method, route;
  uint32_t id = 0;
  bool quiet = false;
  bool ok = false;
};
thread_local std::array<RequestNameCacheEntry, 8> tls_names;
thread_local unsigned tls_names_next = 0;

bool quiet_route(const std::string& r) {
  return r.empty() || r == "/metrics" || r == "/healthz" || r == "/readyz" || r.rfind("/v2/health", 0) == 0 ||
         r == "/v1/trace" || r == "/v1/stream";
}

const RequestNameCacheEntry& request_name(const std::string& method, const std::string& route) {
  for (const auto& e : tls_names) {
    if (e.route == route && e.method == method && (e.ok || !e.route.empty() || !e.method.empty())) return e;
  }
  RequestNameCacheEntry& e = tls_names[tls_names_next++ % tls_names.size()];
  e.method = method;
  e.route = route;
  e.quiet = quiet_route(route);
  // Route templates are few; methods other than the usual ones (a client's
  // own verb on a matched route) must not grow the table without bound.
  e.ok = TraceBuffer::intern(method + " " + (route.empty() ? std::string("unmatched") : route), e.id, 1u << 12);
  return e;
}

// 16 lower-case hex digits (new_request_id()'s form) as 64 bits.
bool parse_hex16(const std::string& s, uint64_t& v) {
  if (s.size() != 16) return false;
  v = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  return true;
}

}  // namespace

TraceRequestScope::TraceRequestScope(const std::string& method, const std::string& route, const std::string& request_id)
    : method_(method),
      route_(route),
      request_id_(request_id),
      start_ns_(TraceBuffer::now_ns()),
      lane_(0),
      outer_(tls_scope) {
  tls_scope = this;
}

void TraceRequestScope::detach() {
  if (!detached_ && tls_scope == this) tls_scope = outer_;
  detached_ = true;
}

void TraceRequestScope::attach() {
  if (!detached_) return;
  outer_ = tls_scope;
  tls_scope = this;
  detached_ = false;
}

TraceRequestScope::~TraceRequestScope() {
  if (!detached_) tls_scope = outer_;
  TraceBuffer& tb = TraceBuffer::global();
  if (!tb.enabled()) return;
  const RequestNameCacheEntry& name = request_name(method_, route_);
  if (name.quiet && njobs_ == 0) return;
  TraceEvent e;
  e.kind = TraceKind::kRequest;
  e.ts_ns = start_ns_;
  e.dur_ns = TraceBuffer::now_ns() - start_ns_;
  e.tid = lane_ ? lane_ : tb.lane("request thread");
  e.name = name.id;
  e.job = job_;
  if (njobs_ > 0) e.flags |= TraceEvent::kHasJob;
  uint64_t rid = 0;
  if (name.ok && plain_jobs_ && parse_hex16(request_id_, rid) && TraceBuffer::intern(tenant_, e.tenant)) {
    e.data = rid;
    tb.add(e);
    return;
  }
  // The slow path: a client's request id, several jobs, a job not named
  // "job-N", or a request name the intern table refuses.
  TraceBuffer::Strings s;
  s.request_id = request_id_;
  if (!plain_jobs_) s.jobs = jobs_;
  TraceRecord r = TraceBuffer::to_record(e, nullptr, s);
  r.tenant = tenant_;
  if (!name.ok) r.name = method_ + " " + (route_.empty() ? std::string("unmatched") : route_);
  tb.add(std::move(r));
}

TraceRequestScope* TraceRequestScope::current() {
  return tls_scope;
}

void TraceRequestScope::add_job(const std::string& tenant, uint64_t flow_id, const std::string& job_id) {
  TraceBuffer& tb = TraceBuffer::global();
  if (!tb.enabled()) return;
  tenant_ = tenant;
  uint64_t n = 0;
  const bool plain = trace_job_number(job_id, n);
  if (njobs_ == 0 && plain) {
    job_ = n;
  } else {
    if (plain_jobs_ && njobs_ > 0) jobs_ = "job-" + std::to_string(job_);
    plain_jobs_ = false;
    if (!jobs_.empty()) jobs_ += ",";
    jobs_ += job_id;
  }
  ++njobs_;
  if (!lane_) lane_ = tb.lane("request thread");
  TraceEvent f;
  f.kind = TraceKind::kFlowStart;
  f.ts_ns = std::max(start_ns_, TraceBuffer::now_ns());
  f.tid = lane_;
  f.job = flow_id / 2;
  if (flow_id % 2 == 0 && TraceBuffer::intern(tenant, f.tenant)) {
    tb.add(f);
  } else {
    tb.add(TraceRecord{'s', "job", "flow", f.ts_ns, 0, lane_, flow_id, tenant, {}});
  }
}

}  // namespace tensord
