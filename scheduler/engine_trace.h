// The engine's trace and job-event hooks (API.md section 9: /v1/trace and
// /v1/stream): spans and flows into TraceBuffer::global(), job state changes
// into EventBus::global(). Called by Engine at submit, start, after each node
// and at the end. A running job's context is thread-local to its runner
// thread (a job runs start to end on one runner). Cheap when nobody listens.
#pragma once

#include <chrono>
#include <string>

namespace tensord {

class Job;
struct BoundNode;
struct CompiledProgram;

namespace engine_trace {

// On the submitting thread, once the job is queued: a flow starts in the
// request's span; "queued" is published.
void job_queued(const Job& job);
// The scheduler refused the job (queue full, shutting down) after job_queued.
void job_rejected(const Job& job);
// On the runner thread, after the job entered running. `graph_id`: the
// captured graph a replay runs ("" for a plain job); its op spans and run
// span carry it as args.graph. `stream`: the runner's stream in its
// partition's pool; the runner thread's lane is named after it
// ("runner <partition> stream <k>"), so the trace has a lane per partition
// and stream.
void job_started(const Job& job, const std::string& graph_id = {}, int stream = 0);
// On the runner thread, after node `b` of `cp` ran for `seconds`, ending at
// `end` (the executor's clock reading; now when not given). `cp` is the
// job's `program` or one of its control-flow subprograms, whose table is
// built once per job.
void op_ran(const CompiledProgram& program, const CompiledProgram& cp, const BoundNode& b, double seconds,
            std::chrono::steady_clock::time_point end = {});
// Once the job ended (any thread): queue and run spans, the final event.
void job_ended(const Job& job);

}  // namespace engine_trace
}  // namespace tensord
