// The trace ring behind GET /v1/trace (API.md section 9): a fixed-size ring
// of trace records rendered as Chrome trace-event JSON (the object format,
// which Perfetto and chrome://tracing open). Lanes (tids) are named threads:
// one per partition runner and one per request thread; their names are kept
// outside the ring so they never fall out of it.
//
// Recording is on the hot path (about ten records per tiny /v1/run), so a
// record is a plain 56-byte TraceEvent: a kind, timestamps, a lane, integer
// ids (the job number of "job-N", a 16-hex-digit request id), interned
// strings (tenant, partition, request name, state: small bounded sets) and
// the serial of immutable shared data (TraceData: a program's node table,
// built once per compiled program or captured graph). Nothing is allocated
// or formatted per record; names and JSON are produced only when the ring is
// read. Records that do not fit that form (a client's X-Request-Id, a job id
// not "job-N", TraceRecords from tests) are kept whole in a TraceData of
// their own: the slow path.
//
// Thread-safety: writers claim a slot with one atomic increment and publish
// it under a per-slot sequence (a seqlock: odd while written, 2 * index + 2
// once complete); readers copy a slot and keep it only if its sequence did
// not move. Writers never wait for readers or for each other (except for a
// writer a whole ring lap behind on the same slot). TraceData is kept alive
// by a registry (one mutex, taken once per piece of data, never per record)
// until the ring has wrapped past its last record and nobody else holds it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tensord {

// A record in its rendered form: what snapshot() returns, and what add()
// takes on the slow path.
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
  std::string args;    // a JSON object ("{...}", written by a JSON writer) or empty
};

// What a fast record is; each kind renders to one fixed form (trace_buffer.cpp).
enum class TraceKind : uint8_t {
  kNone,       // never written
  kRecord,     // a whole TraceRecord in TraceData `data` (the slow path)
  kRequest,    // X "<name>" request; args request_id (16 hex digits in `data`), jobs ("job-<job>" if kHasJob)
  kFlowStart,  // s "job" (id 2 * job) or "ops" (kOpsFlow: id 2 * job + 1), cat flow
  kFlowEnd,    // f, likewise
  kSubmit,     // X "submit job-N" request, job args
  kRejected,   // X "rejected job-N" job, job args
  kQueued,     // b "queued job-N" queue, id N, job args
  kRun,        // X "run job-N" job, job args + state (+ graph from TraceTable `data`)
  kEnded,      // X "<state> job-N" job (never ran), job args
  kOp,         // X op span: node `index` of TraceTable `data`, job N
};

// One record, as written into the ring: trivially copyable, no pointers.
struct TraceEvent {
  static constexpr uint8_t kHasJob = 1;   // kRequest: the request submitted job `job`
  static constexpr uint8_t kOpsFlow = 1;  // kFlowStart/kFlowEnd: the run -> ops flow

  TraceKind kind = TraceKind::kNone;
  uint8_t flags = 0;
  uint16_t reserved = 0;
  uint32_t tid = 0;        // lane
  int64_t ts_ns = 0;       // since the trace epoch
  int64_t dur_ns = 0;      // X and b
  uint32_t tenant = 0;     // interned; 0 = "" (admins only)
  uint32_t partition = 0;  // interned
  uint32_t name = 0;       // interned: kRequest's name, kRun/kEnded's state
  uint32_t index = 0;      // kOp: node index in the table
  uint64_t job = 0;        // the N of "job-N"
  uint64_t data = 0;       // TraceData serial (kRecord, kOp, kRun), or kRequest's request id bits
};
static_assert(std::is_trivially_copyable_v<TraceEvent> && sizeof(TraceEvent) == 56);

// Immutable data that records refer to by serial. `last_seq` is the ring
// index past the last record that refers to it (set by whoever wrote them);
// the registry frees it once the ring has wrapped past that and only the
// registry holds it.
struct TraceData {
  virtual ~TraceData() = default;
  uint64_t serial = 0;  // set by TraceBuffer::retain
  mutable std::atomic<uint64_t> last_seq{0};
  // Raises last_seq to at least `seq` (several writers may share the data).
  void touch(uint64_t seq) const;
};

// The per-program (or per-graph) table behind op spans: what their args
// name, built once from a compiled program (scheduler/engine_trace.cpp).
// Plain text, no JSON: the reader quotes and escapes.
struct TraceTable : TraceData {
  struct Node {
    std::string name;                          // the span's name: the op's name, or the node id
    std::string id;                            // args.node
    std::string op;                            // args.op ("" without an op)
    std::vector<std::string> inputs, outputs;  // shapes, "float32[2, 3]"
  };
  std::string graph;  // args.graph ("" for a plain job)
  std::vector<Node> nodes;
};

class TraceBuffer {
 public:
  static constexpr size_t kDefaultCapacity = 65536;

  // The process-wide ring (kDefaultCapacity records).
  static TraceBuffer& global();

  explicit TraceBuffer(size_t capacity = kDefaultCapacity);
  ~TraceBuffer();
  TraceBuffer(const TraceBuffer&) = delete;
  TraceBuffer& operator=(const TraceBuffer&) = delete;

  size_t capacity() const { return capacity_; }
  // False for a zero-capacity ring or after set_enabled(false) (--trace off):
  // the engine and the HTTP sessions then record nothing.
  bool enabled() const { return capacity_ > 0 && on_.load(std::memory_order_relaxed); }
  void set_enabled(bool on) { on_.store(on, std::memory_order_relaxed); }
  // Nanoseconds since the process's trace epoch (steady clock).
  static int64_t now_ns();
  static int64_t ns_of(std::chrono::steady_clock::time_point t);

  // The id of `s` in the process-wide table of interned strings (0 is ""),
  // for TraceEvent's tenant, partition and name. Ids never change and
  // strings are never freed: only for small bounded sets (tenants,
  // partitions, route names, states). Fails (returns false) when the table
  // holds `limit` strings already. Cheap for the last few strings a thread
  // interned (a thread-local cache), else one mutex.
  static bool intern(std::string_view s, uint32_t& id, uint32_t limit = kInternLimit);
  static constexpr uint32_t kInternLimit = 1u << 16;
  // The interned string `id` ("" when unknown).
  static std::string interned(uint32_t id);

  // Appends, overwriting the oldest record when full. No allocation, no lock.
  // Returns the record's ring index (for TraceData::touch).
  uint64_t add(const TraceEvent& e);
  // Appends `n` records in consecutive slots (one atomic increment for all).
  uint64_t add(const TraceEvent* es, size_t n);
  // Appends a whole record (the slow path: one allocation and the registry's mutex).
  void add(TraceRecord r);
  // Records ever added (including those overwritten).
  uint64_t added() const { return next_.load(std::memory_order_relaxed); }

  // Registers `d` (sets its serial) and keeps it until the ring has wrapped
  // past d->last_seq and nobody else holds it. Records refer to it as
  // TraceEvent::data = d->serial.
  void retain(const std::shared_ptr<TraceData>& d);
  // TraceData held now (tests: the registry stays bounded).
  size_t retained() const;

  // The lane of the calling thread, named `name` + `suffix` on first use
  // (later names for the same thread are ignored). Cheap after the first call.
  uint32_t lane(std::string_view name, std::string_view suffix = {});

  // The newest `last` records that `visible` accepts, oldest first.
  std::vector<TraceRecord> snapshot(size_t last, const std::function<bool(const TraceRecord&)>& visible) const;

  // {"traceEvents": [...], "displayTimeUnit": "ms"}: thread-name metadata
  // for every lane, then the newest `last` records visible to `tenant`
  // (every record when see_all).
  std::string render_json(size_t last, const std::string& tenant, bool see_all) const;

  // Strings that replace what a TraceEvent holds as numbers or ids (the
  // slow path): a job not named "job-N", a client's request id, several
  // jobs, a tenant or partition the intern table refused. Empty: unused.
  struct Strings {
    std::string_view job_id, request_id, jobs, tenant, partition;
  };
  // The rendered form of `e`; `d` is the TraceData it refers to (or null).
  static TraceRecord to_record(const TraceEvent& e, const TraceData* d, const Strings& s = {});

 private:
  struct Slot;
  void write_slot(uint64_t idx, const TraceEvent& e);
  bool read_slot(uint64_t idx, TraceEvent& out) const;
  void collect_locked(std::vector<std::shared_ptr<const TraceData>>& dead);

  static std::atomic<uint64_t> next_uid_;
  const size_t capacity_;
  const uint64_t uid_;  // tells rings apart for the threads' lane caches
  std::atomic<bool> on_{true};
  std::unique_ptr<Slot[]> slots_;
  alignas(64) std::atomic<uint64_t> next_{0};           // records ever claimed; slot next_ % capacity_ is the next
  alignas(64) mutable std::mutex data_mu_;              // the TraceData registry and the lane names
  std::vector<std::shared_ptr<const TraceData>> data_;  // by serial, ascending
  uint64_t next_serial_ = 0;
  size_t collect_at_ = 256;
  std::vector<std::string> lane_names_;  // index = tid - 1
};

// The N of a job id "job-N" (N without leading zeros, fits 64 bits): true
// when `id` has that form, so that "job-" + N renders it back.
bool trace_job_number(std::string_view id, uint64_t& n);

}  // namespace tensord
