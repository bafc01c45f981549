#include "scheduler/engine_trace.h"

#include <array>
#include <charconv>
#include <cstdint>
#include <memory>
#include <string>

#include "graphs/compiled_program.h"
#include "metrics/event_bus.h"
#include "metrics/trace_buffer.h"
#include "metrics/trace_request_scope.h"
#include "ops/dtype.h"
#include "scheduler/job.h"

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

// What a job's records carry. `plain`: its id is "job-N" and its tenant and
// partition are interned, so its records are TraceEvents; otherwise they are
// rendered into whole records (the slow path).
struct JobRef {
  uint64_t n = 0;
  bool plain = false;
  uint32_t tenant = 0, partition = 0;
};

JobRef job_ref(const Job& job) {
  JobRef j;
  j.plain = trace_job_number(job.id(), j.n) && TraceBuffer::intern(job.tenant(), j.tenant) &&
            TraceBuffer::intern(job.partition(), j.partition);
  if (!j.plain) j.n = job_number(job);
  return j;
}

// The interned name of a job state (five strings, interned at first use;
// refused only if the table were full of tenant and partition names).
uint32_t state_id(JobState s) {
  static const std::array<uint32_t, 5> ids = [] {
    std::array<uint32_t, 5> a{};
    for (int i = 0; i < 5; ++i)
      TraceBuffer::intern(job_state_name(static_cast<JobState>(i)), a[static_cast<size_t>(i)]);
    return a;
  }();
  return ids[static_cast<size_t>(s)];
}

// Writes `es` for `job` (in consecutive slots); returns the ring index past
// them (0 on the slow path).
template <size_t N>
uint64_t emit(TraceBuffer& tb, std::array<TraceEvent, N> es, const Job& job, const JobRef& j,
              const TraceData* d = nullptr) {
  for (TraceEvent& e : es) {
    e.tenant = j.tenant;
    e.partition = j.partition;
    e.job = j.n;
  }
  if (j.plain) return tb.add(es.data(), N);
  TraceBuffer::Strings s;
  s.job_id = job.id();
  s.tenant = job.tenant();
  s.partition = job.partition();
  for (const TraceEvent& e : es) tb.add(TraceBuffer::to_record(e, d, s));
  return 0;
}

uint64_t emit(TraceBuffer& tb, const TraceEvent& e, const Job& job, const JobRef& j, const TraceData* d = nullptr) {
  return emit(tb, std::array<TraceEvent, 1>{e}, job, j, d);
}

TraceEvent event(TraceKind kind, int64_t ts, int64_t dur, uint32_t lane, uint8_t flags = 0) {
  TraceEvent e;
  e.kind = kind;
  e.ts_ns = ts;
  e.dur_ns = dur;
  e.tid = lane;
  e.flags = flags;
  return e;
}

// ------------------------------------------------------------ program tables

// A TraceTable with what it was built from, in a form that is compared
// without formatting: per node its op, then per input and output value its
// dtype, rank and dims (-1 for an id out of range).
struct ProgramTable : TraceTable {
  std::vector<int64_t> signature;
};

// "float32[2, 3]" (TensorMeta::str()'s form).
std::string meta_text(const TensorMeta& m) {
  std::string out(dtype_name(m.dtype));
  out += '[';
  char buf[24];
  for (size_t i = 0; i < m.shape.size(); ++i) {
    if (i) out += ", ";
    auto res = std::to_chars(buf, buf + sizeof buf, m.shape[i]);
    out.append(buf, res.ptr);
  }
  out += ']';
  return out;
}

// Calls value(v) for every value id the node reads (outputs: false) or writes.
template <class F>
void each_value(const BoundNode& b, F&& value) {
  for (const auto& ids : b.tensor_params) {
    for (int v : ids) value(v, false);
  }
  for (int v : b.outputs) value(v, true);
}

const ValueInfo* value_info(const CompiledProgram& cp, int v) {
  return v >= 0 && static_cast<size_t>(v) < cp.values.size() ? &cp.values[static_cast<size_t>(v)] : nullptr;
}

// Does `t` describe `nodes` of `cp` (same ids, ops and shapes)? No allocation.
bool matches(const ProgramTable& t, const CompiledProgram& cp) {
  if (t.nodes.size() != cp.nodes.size()) return false;
  size_t k = 0;
  const auto& sig = t.signature;
  auto next = [&](int64_t x) { return k < sig.size() && sig[k++] == x; };
  for (size_t i = 0; i < cp.nodes.size(); ++i) {
    const BoundNode& b = cp.nodes[i];
    if (t.nodes[i].id != b.id || !next(static_cast<int64_t>(reinterpret_cast<uintptr_t>(b.op)))) return false;
    bool ok = true;
    each_value(b, [&](int v, bool) {
      const ValueInfo* vi = value_info(cp, v);
      if (!ok) return;
      if (vi == nullptr) {
        ok = next(-1);
        return;
      }
      ok = next(static_cast<int64_t>(vi->meta.dtype)) && next(static_cast<int64_t>(vi->meta.shape.size()));
      for (size_t d = 0; ok && d < vi->meta.shape.size(); ++d) ok = next(vi->meta.shape[d]);
    });
    if (!ok) return false;
  }
  return k == sig.size();
}

std::shared_ptr<ProgramTable> make_table(const CompiledProgram& cp, const BoundNode* only, const std::string& graph) {
  auto t = std::make_shared<ProgramTable>();
  t->graph = graph;
  auto add = [&](const BoundNode& b) {
    TraceTable::Node n;
    n.name = b.op ? b.op->name : b.id;
    n.id = b.id;
    if (b.op) n.op = b.op->name;
    t->signature.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(b.op)));
    each_value(b, [&](int v, bool output) {
      const ValueInfo* vi = value_info(cp, v);
      if (vi == nullptr) {
        t->signature.push_back(-1);
        return;
      }
      t->signature.push_back(static_cast<int64_t>(vi->meta.dtype));
      t->signature.push_back(static_cast<int64_t>(vi->meta.shape.size()));
      for (int64_t d : vi->meta.shape) t->signature.push_back(d);
      (output ? n.outputs : n.inputs).push_back(meta_text(vi->meta));
    });
    t->nodes.push_back(std::move(n));
  };
  if (only != nullptr) {
    add(*only);
  } else {
    t->nodes.reserve(cp.nodes.size());
    for (const auto& b : cp.nodes) add(b);
  }
  return t;
}

// The table for `cp` (and `graph`): one of the last few this runner thread
// built when it still matches (a replayed graph, a program sent again),
// else a new one, registered with the ring.
std::shared_ptr<const TraceTable> table_for(TraceBuffer& tb, const CompiledProgram& cp, const std::string& graph) {
  // Each entry remembers the program object it was last checked against
  // (CompiledProgram::serial): a graph replayed again skips the check of
  // every node.
  struct Entry {
    std::shared_ptr<ProgramTable> table;
    uint64_t checked = 0;  // the serial of the program it matched last
  };
  thread_local std::array<Entry, 4> cache;
  thread_local unsigned next = 0;
  thread_local const TraceBuffer* owner = nullptr;
  if (owner != &tb) {
    cache = {};
    owner = &tb;
  }
  const uint64_t serial = cp.serial.value();
  for (auto& e : cache) {
    if (!e.table || e.table->graph != graph) continue;
    if (e.checked == serial) return e.table;
    if (matches(*e.table, cp)) {
      e.checked = serial;
      return e.table;
    }
  }
  auto t = make_table(cp, nullptr, graph);
  tb.retain(t);
  cache[next++ % cache.size()] = Entry{t, serial};
  return t;
}

// ------------------------------------------------------------ the running job

// The job running on this runner thread.
struct Running {
  const Job* job = nullptr;
  int64_t start_ns = 0;
  uint32_t lane = 0;
  bool first_op = true;
  JobRef ref;
  std::string graph;  // the replayed graph's id, or ""
  const CompiledProgram* cp = nullptr;
  std::shared_ptr<const TraceTable> table;  // cp's: the job's program (the first op's)
  // Tables of the control-flow subprograms whose nodes ran, built once per job.
  std::vector<std::pair<const CompiledProgram*, std::shared_ptr<const TraceTable>>> bodies;
  // The job's latest op spans, written to the ring together (one claim of
  // slots for up to 32 records): flushed when full, before any other record
  // of the job, and when the job ends.
  std::array<TraceEvent, 32> ops;
  uint32_t nops = 0;
};
thread_local Running tls_running;

void flush_ops(TraceBuffer& tb, Running& r) {
  if (r.nops == 0) return;
  tb.add(r.ops.data(), r.nops);
  r.nops = 0;
}

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

}  // namespace

void job_queued(const Job& job) {
  TraceBuffer& tb = TraceBuffer::global();
  if (tb.enabled()) {
    if (TraceRequestScope* scope = TraceRequestScope::current()) {
      scope->add_job(job.tenant(), 2 * job_number(job), job.id());
    } else {
      // No request around (tests, internal callers): a zero-length submit
      // slice for the flow to start in.
      const JobRef j = job_ref(job);
      const uint32_t lane = tb.lane("submit thread");
      const int64_t now = TraceBuffer::now_ns();
      emit(tb, std::array{event(TraceKind::kSubmit, now, 0, lane), event(TraceKind::kFlowStart, now, 0, lane)}, job, j);
    }
  }
  publish(job, "queued");
}

void job_rejected(const Job& job) {
  TraceBuffer& tb = TraceBuffer::global();
  if (tb.enabled()) {
    const JobRef j = job_ref(job);
    const uint32_t lane = tb.lane("submit thread");
    const int64_t now = TraceBuffer::now_ns();
    emit(tb, std::array{event(TraceKind::kRejected, now, 0, lane), event(TraceKind::kFlowEnd, now, 0, lane)}, job, j);
  }
  publish(job, "rejected");
}

void job_started(const Job& job, const std::string& graph_id, int stream) {
  TraceBuffer& tb = TraceBuffer::global();
  if (tb.enabled()) {
    Running& r = tls_running;
    flush_ops(tb, r);  // a previous job's, if it ended on another thread
    r.job = &job;
    r.start_ns = TraceBuffer::now_ns();
    // A runner thread keeps its partition and stream for life: the lane's
    // name is built once per thread.
    thread_local std::string lane_suffix;
    if (lane_suffix.empty()) lane_suffix = job.partition() + " stream " + std::to_string(stream);
    r.lane = tb.lane("runner ", lane_suffix);
    r.first_op = true;
    r.ref = job_ref(job);
    r.graph = graph_id;
    r.cp = nullptr;
    r.table.reset();
    r.bodies.clear();
  }
  publish(job, "running");
}

void op_ran(const CompiledProgram& program, const CompiledProgram& cp, const BoundNode& b, double seconds,
            std::chrono::steady_clock::time_point end_at) {
  Running& r = tls_running;
  if (r.job == nullptr) return;
  TraceBuffer& tb = TraceBuffer::global();
  const int64_t end =
      end_at == std::chrono::steady_clock::time_point{} ? TraceBuffer::now_ns() : TraceBuffer::ns_of(end_at);
  const int64_t dur = static_cast<int64_t>(seconds * 1e9);
  const int64_t start = std::max(r.start_ns, end - dur);
  TraceEvent e = event(TraceKind::kOp, start, end - start, r.lane);
  const auto first = reinterpret_cast<uintptr_t>(cp.nodes.data());
  const auto at = reinterpret_cast<uintptr_t>(&b);
  std::shared_ptr<TraceTable> one_off;
  JobRef ref = r.ref;
  const TraceData* d = nullptr;
  if (at >= first && at < first + cp.nodes.size() * sizeof(BoundNode)) {
    // The job's program keeps r.table (the run span names it); a
    // subprogram's table is built once per job and kept beside it.
    const TraceTable* t = nullptr;
    if (&cp == &program) {
      if (r.cp != &cp || !r.table) {
        r.table = table_for(tb, cp, r.graph);
        r.cp = &cp;
      }
      t = r.table.get();
    } else {
      for (const auto& [p, bt] : r.bodies) {
        if (p == &cp) t = bt.get();
      }
      if (!t) {
        auto nt = table_for(tb, cp, r.graph);
        t = nt.get();
        r.bodies.emplace_back(&cp, std::move(nt));
      }
    }
    e.index = static_cast<uint32_t>((at - first) / sizeof(BoundNode));
    e.data = t->serial;
    d = t;
  } else {
    // A node of a control-flow body (not in `cp`): a table of its own, rendered now.
    one_off = make_table(cp, &b, r.graph);
    d = one_off.get();
    ref.plain = false;
  }
  if (r.first_op) {  // the run -> ops flow, then the op
    r.first_op = false;
    auto s = event(TraceKind::kFlowStart, r.start_ns, 0, r.lane, TraceEvent::kOpsFlow);
    auto f = event(TraceKind::kFlowEnd, start, 0, r.lane, TraceEvent::kOpsFlow);
    if (ref.plain) {
      emit(tb, std::array{s, f, e}, *r.job, ref, d);
      return;
    }
    emit(tb, std::array{s, f}, *r.job, r.ref);
  }
  if (ref.plain) {
    e.tenant = ref.tenant;
    e.partition = ref.partition;
    e.job = ref.n;
    if (r.nops == r.ops.size()) flush_ops(tb, r);
    r.ops[r.nops++] = e;
    return;
  }
  flush_ops(tb, r);
  emit(tb, e, *r.job, ref, d);
}

void job_ended(const Job& job) {
  TraceBuffer& tb = TraceBuffer::global();
  const JobState st = job.state();
  if (tb.enabled()) {
    const int64_t created = TraceBuffer::ns_of(job.created());
    Running& r = tls_running;
    if (r.job == &job) {
      flush_ops(tb, r);  // before the run span, whose sequence number keeps the table
      // The run ends when the job did (its waiters and its reply may be on
      // their way already), not when this record is written.
      const int64_t end = std::max(r.start_ns, TraceBuffer::ns_of(job.ended_at()));
      const JobRef& j = r.ref;
      TraceEvent run = event(TraceKind::kRun, r.start_ns, end - r.start_ns, r.lane);
      run.name = state_id(st);
      if (!r.graph.empty() && !r.table) {  // a replay that ran no node: a table for its graph id alone
        auto t = std::make_shared<ProgramTable>();
        t->graph = r.graph;
        tb.retain(t);
        r.table = std::move(t);
      }
      if (!r.graph.empty()) run.data = r.table->serial;
      const uint64_t last =
          emit(tb,
               std::array{event(TraceKind::kQueued, created, std::max<int64_t>(0, r.start_ns - created), r.lane), run,
                          event(TraceKind::kFlowEnd, r.start_ns, 0, r.lane)},
               job, j, r.table.get());
      if (r.table) r.table->touch(last);
      for (const auto& [p, bt] : r.bodies) bt->touch(last);
      r.job = nullptr;
      r.cp = nullptr;
      r.table.reset();
      r.bodies.clear();
    } else {
      // Never ran (cancelled, expired, shut down): its queue span ends with it.
      const int64_t end = std::max(created, TraceBuffer::ns_of(job.ended_at()));
      const JobRef j = job_ref(job);
      const uint32_t lane = tb.lane("queue ", job.partition());
      TraceEvent ended = event(TraceKind::kEnded, end, 0, lane);
      ended.name = state_id(st);
      emit(tb,
           std::array{event(TraceKind::kQueued, created, std::max<int64_t>(0, end - created), lane), ended,
                      event(TraceKind::kFlowEnd, end, 0, lane)},
           job, j);
    }
  }
  publish(job, std::string(job_state_name(st)));
}

}  // namespace tensord::engine_trace
