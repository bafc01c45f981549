#include "scheduler/engine_trace.h"

#include <string>

#include "graphs/compiled_program.h"
#include "metrics/event_bus.h"
#include "metrics/trace_buffer.h"
#include "scheduler/job_handle.h"

namespace tensord::engine_trace {
namespace {

// Flow ids: request -> job is 2n, job -> first op is 2n + 1 (n: the job number).
uint64_t job_number(const Job& job) {
  const std::string& id = job.id();
  auto dash = id.rfind('-');
  uint64_t n = 0;
  for (size_t i = dash == std::string::npos ? 0 : dash + 1; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9') return std::hash<std::string>()(id) >> 2;
    n = n * 10 + static_cast<uint64_t>(id[i] - '0');
  }
  return n;
}

// The job running on this runner thread.
struct Running {
  const Job* job = nullptr;
  int64_t start_ns = 0;
  uint32_t lane = 0;
  bool first_op = true;
};
thread_local Running tls_running;

void publish(const Job& job, std::string state) {
  EventBus& bus = EventBus::global();
  if (!bus.has_subscribers()) return;
  JobStateEvent e;
  e.id = job.id();
  e.state = std::move(state);
  e.tenant = job.tenant();
  e.partition = job.partition();
  e.queue_ms = job.queue_ms();
  e.run_ms = job.run_ms();
  bus.publish(e);
}

std::string job_args(const Job& job) {
  return "{\"job\":\"" + json_escape(job.id()) + "\",\"tenant\":\"" + json_escape(job.tenant()) +
         "\",\"partition\":\"" + json_escape(job.partition()) + "\"}";
}

void append_shapes(std::string& out, const CompiledProgram& cp, const std::vector<int>& ids) {
  for (int v : ids) {
    if (v < 0 || static_cast<size_t>(v) >= cp.values.size()) continue;
    if (out.back() != '[') out += ',';
    out += '"' + json_escape(cp.values[static_cast<size_t>(v)].meta.str()) + '"';
  }
}

}  // namespace

void job_queued(const Job& job) {
  TraceBuffer& tb = TraceBuffer::global();
  if (tb.enabled()) {
    const uint64_t flow = 2 * job_number(job);
    if (TraceRequestScope* scope = TraceRequestScope::current()) {
      scope->add_job(job.tenant(), flow, job.id());
    } else {
      // No request around (tests, internal callers): a zero-length submit
      // slice for the flow to start in.
      uint32_t lane = tb.lane("submit thread");
      int64_t now = TraceBuffer::now_ns();
      tb.add(TraceRecord{'X', "submit " + job.id(), "request", now, 0, lane, 0, job.tenant(), job_args(job)});
      tb.add(TraceRecord{'s', "job", "flow", now, 0, lane, flow, job.tenant(), {}});
    }
  }
  publish(job, "queued");
}

void job_rejected(const Job& job) {
  TraceBuffer& tb = TraceBuffer::global();
  if (tb.enabled()) {
    uint32_t lane = tb.lane("submit thread");
    int64_t now = TraceBuffer::now_ns();
    tb.add(TraceRecord{'X', "rejected " + job.id(), "job", now, 0, lane, 0, job.tenant(), job_args(job)});
    tb.add(TraceRecord{'f', "job", "flow", now, 0, lane, 2 * job_number(job), job.tenant(), {}});
  }
  publish(job, "rejected");
}

void job_started(const Job& job) {
  TraceBuffer& tb = TraceBuffer::global();
  if (tb.enabled()) {
    tls_running = Running{&job, TraceBuffer::now_ns(), tb.lane("runner " + job.partition()), true};
  }
  publish(job, "running");
}

void op_ran(const CompiledProgram& cp, const BoundNode& b, double seconds) {
  Running& r = tls_running;
  if (r.job == nullptr) return;
  TraceBuffer& tb = TraceBuffer::global();
  const int64_t end = TraceBuffer::now_ns();
  const int64_t dur = static_cast<int64_t>(seconds * 1e9);
  const int64_t start = std::max(r.start_ns, end - dur);
  const uint64_t n = job_number(*r.job);
  if (r.first_op) {
    r.first_op = false;
    tb.add(TraceRecord{'s', "ops", "flow", r.start_ns, 0, r.lane, 2 * n + 1, r.job->tenant(), {}});
    tb.add(TraceRecord{'f', "ops", "flow", start, 0, r.lane, 2 * n + 1, r.job->tenant(), {}});
  }
  std::string args = "{\"node\":\"" + json_escape(b.id) + "\",\"op\":\"" + json_escape(b.op ? b.op->name : "") +
                     "\",\"job\":\"" + json_escape(r.job->id()) + "\",\"inputs\":[";
  for (const auto& ids : b.tensor_params) append_shapes(args, cp, ids);
  args += "],\"outputs\":[";
  append_shapes(args, cp, b.outputs);
  args += "]}";
  tb.add(TraceRecord{'X', b.op ? b.op->name : b.id, "op", start, end - start, r.lane, 0, r.job->tenant(),
                     std::move(args)});
}

void job_ended(const Job& job) {
  TraceBuffer& tb = TraceBuffer::global();
  const std::string state(job_state_name(job.state()));
  if (tb.enabled()) {
    const uint64_t n = job_number(job);
    const int64_t created = TraceBuffer::ns_of(job.created());
    Running& r = tls_running;
    if (r.job == &job) {
      const int64_t end = TraceBuffer::now_ns();
      tb.add(TraceRecord{'b', "queued " + job.id(), "queue", created, std::max<int64_t>(0, r.start_ns - created),
                         r.lane, n, job.tenant(), job_args(job)});
      std::string args = job_args(job);
      args.insert(args.size() - 1, ",\"state\":\"" + state + "\"");
      tb.add(TraceRecord{'X', "run " + job.id(), "job", r.start_ns, end - r.start_ns, r.lane, 0, job.tenant(), args});
      tb.add(TraceRecord{'f', "job", "flow", r.start_ns, 0, r.lane, 2 * n, job.tenant(), {}});
      tls_running = Running{};
    } else {
      // Never ran (cancelled, expired, shut down): its queue span ends here.
      const int64_t end = TraceBuffer::now_ns();
      uint32_t lane = tb.lane("queue " + job.partition());
      tb.add(TraceRecord{'b', "queued " + job.id(), "queue", created, std::max<int64_t>(0, end - created), lane, n,
                         job.tenant(), job_args(job)});
      tb.add(TraceRecord{'X', state + " " + job.id(), "job", end, 0, lane, 0, job.tenant(), job_args(job)});
      tb.add(TraceRecord{'f', "job", "flow", end, 0, lane, 2 * n, job.tenant(), {}});
    }
  }
  publish(job, state);
}

}  // namespace tensord::engine_trace
