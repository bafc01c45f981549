// What recording costs per tiny /v1/run, without the server around it: the
// exact calls the HTTP session and the engine make for one request of
// bench/metrics.py's program (3 nodes on 16 float32), timed in a loop on
// one thread (no contention; the series exist already, as in a warm server).
// Prints one JSON line: {"metrics_ns", "trace_ns", "iters", "reps",
// "parts_ns": {"job_events", "ops", "job_end", "http"}} per request, each
// the median of --reps runs; parts_ns also has "op_launch_in_200" (one op
// launch of a 200-node job, its batch committed once) and "trace_op_span"
// (one op span inside a running job), per node.
//
//   metrics_record_bench [--iters 200000] [--reps 7]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "api/program_json.h"
#include "graphs/compiled_program.h"
#include "metrics/trace_buffer.h"
#include "metrics/trace_request_scope.h"
#include "scheduler/engine_metrics.h"
#include "scheduler/engine_trace.h"
#include "scheduler/job.h"
#include "scheduler/scheduler_types.h"
#include "server/http_metrics.h"

using namespace tensord;

namespace {

const char* kProgram =
    R"({"inputs": {"x": {"dtype": "float32", "shape": [16]}},
        "nodes": [{"id": "a", "op": "mul", "args": ["x", 2.0], "outputs": ["y"]},
                  {"id": "b", "op": "add", "args": ["y", 1.0], "outputs": ["z"]},
                  {"id": "s", "op": "sum", "args": ["z"], "outputs": ["t"]}],
        "outputs": ["t"]})";

template <class F>
double median_ns_per_iter(int reps, int iters, F&& body) {
  std::vector<double> per;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) body(i);
    auto t1 = std::chrono::steady_clock::now();
    per.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / iters);
  }
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 200000, reps = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iters")) iters = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--reps")) reps = std::max(1, std::atoi(argv[i + 1]));
  }
  auto doc = parse_json_object(kProgram, "program");
  TensorMeta x;
  x.shape = {16};
  CompiledProgram cp =
      compile_program(program_from_json(doc), {{"x", x}}, [](const std::string&) { return std::nullopt; });

  // Metrics: what one request records with --metrics on (series warm).
  HttpMetrics http;
  EngineMetrics em("cpu");
  const std::string tenant = "default", partition = "default", state = "succeeded";
  JobEvent ev;
  ev.tenant = tenant;
  ev.partition = partition;
  auto events = [&](int i) {
    for (auto kind : {JobEvent::Kind::kQueued, JobEvent::Kind::kStarted, JobEvent::Kind::kFinished}) {
      ev.kind = kind;
      ev.id = static_cast<uint64_t>(i);
      em.on_event(ev);
    }
  };
  OpMetrics::Batch batch;
  auto ops = [&](int) {
    for (const auto& b : cp.nodes) batch.add(b.op->name, 1e-6);
    em.ops_ran(batch);
  };
  const std::string device = "cpu:0";
  auto job_end = [&](int) {
    em.tenant_memory(tenant, 4096, 1 << 30);
    em.device_memory(device, 4096, 1 << 30);
    em.job_finished(tenant, partition, state, 2e-5, 3e-5);
  };
  auto request = [&](int) { http.record("/v1/run", "POST", 200, 1e-4); };
  double metrics_ns = median_ns_per_iter(reps, iters, [&](int i) {
    events(i);
    ops(i);
    job_end(i);
    request(i);
  });
  // A 200-node job's op launches, per node (summed per op, one commit).
  const double op_launch_ns =
      median_ns_per_iter(reps, std::max(1, iters / 200),
                         [&](int) {
                           for (int k = 0; k < 200; ++k)
                             batch.add(cp.nodes[static_cast<size_t>(k) % cp.nodes.size()].op->name, 1e-6);
                           em.ops_ran(batch);
                         }) /
      200;
  const double events_ns = median_ns_per_iter(reps, iters, events);
  const double ops_ns = median_ns_per_iter(reps, iters, ops);
  const double job_end_ns = median_ns_per_iter(reps, iters, job_end);
  const double request_ns = median_ns_per_iter(reps, iters, request);

  // Trace: the request span, the flows, the queue, run and op spans.
  const std::string method = "POST", route = "/v1/run", request_id = "0123456789abcdef";
  auto traced_job = [&](int i) {
    TraceRequestScope scope(method, route, request_id);
    Job job("job-" + std::to_string(i + 1), tenant, partition);
    engine_trace::job_queued(job);
    job.start();
    engine_trace::job_started(job);
    for (const auto& b : cp.nodes) engine_trace::op_ran(cp, cp, b, 1e-6);
    job.succeed(JobResult{});
    engine_trace::job_ended(job);
  };
  double trace_ns = median_ns_per_iter(reps, iters, traced_job);
  // One op span inside a running job (a long program's or replay's nodes).
  double op_span_ns = 0;
  {
    Job job("job-" + std::to_string(iters + 1), tenant, partition);  // a plain "job-N" id
    job.start();
    engine_trace::job_started(job);
    constexpr int kSpans = 200;
    op_span_ns =
        median_ns_per_iter(reps, std::max(1, iters / kSpans),
                           [&](int) {
                             for (int k = 0; k < kSpans; ++k)
                               engine_trace::op_ran(cp, cp, cp.nodes[static_cast<size_t>(k) % cp.nodes.size()], 1e-6);
                           }) /
        kSpans;
    job.succeed(JobResult{});
    engine_trace::job_ended(job);
  }
  // The same loop with the trace off: the Job and scope themselves.
  TraceBuffer::global().set_enabled(false);
  double base_ns = median_ns_per_iter(reps, iters, traced_job);
  std::printf(
      "{\"metrics_ns\": %.1f, \"trace_ns\": %.1f, \"iters\": %d, \"reps\": %d, \"parts_ns\": {\"job_events\": %.1f, "
      "\"ops\": %.1f, \"job_end\": %.1f, \"http\": %.1f, \"op_launch_in_200\": %.1f, \"trace_op_span\": %.1f}}\n",
      metrics_ns, std::max(0.0, trace_ns - base_ns), iters, reps, events_ns, ops_ns, job_end_ns, request_ns,
      op_launch_ns, op_span_ns);
  return 0;
}
