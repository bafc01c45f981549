#include "metrics/trace_buffer.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <thread>
#include <unordered_map>
#include <utility>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "metrics/utf8.h"

namespace tensord {

// One cache line: the sequence, then the event as seven words (atomics, so
// that a reader racing a writer is a seqlock retry, not a data race).
struct alignas(64) TraceBuffer::Slot {
  static constexpr size_t kWords = sizeof(TraceEvent) / sizeof(uint64_t);
  std::atomic<uint64_t> seq{0};  // 0: never written; 2i+1: record i being written; 2i+2: record i
  std::array<std::atomic<uint64_t>, kWords> words{};
};
static_assert(sizeof(TraceEvent) % sizeof(uint64_t) == 0);

namespace {

std::chrono::steady_clock::time_point epoch() {
  static const auto t0 = std::chrono::steady_clock::now();
  return t0;
}

// ------------------------------------------------------------ interned strings

// Process-wide, append-only; strings are leaked on purpose (ids stay valid
// for every ring, and readers index without holding the lock for long).
struct InternTable {
  std::mutex mu;
  std::deque<std::string> strings{std::string()};  // id 0 = ""
  std::unordered_map<std::string_view, uint32_t> ids{{std::string_view(), 0}};
};

InternTable& interns() {
  static auto* t = new InternTable;
  return *t;
}

struct InternCacheEntry {
  const std::string* s = nullptr;
  uint32_t id = 0;
};
thread_local std::array<InternCacheEntry, 8> tls_interns;
thread_local unsigned tls_intern_next = 0;

// ------------------------------------------------------------ rendering

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// Names and ids may be the user's (node ids, graph names, a client's request
// id): the writer escapes them, and invalid UTF-8 becomes '?'.
void write_string(JsonWriter& w, std::string_view s) {
  if (is_valid_utf8(s)) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  } else {
    const std::string v = valid_utf8(s);
    w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  }
}

// Microseconds with nanosecond precision: 1234.567 (a fixed three decimals,
// which the writer's shortest double form would not keep).
void write_us(JsonWriter& w, int64_t ns) {
  if (ns < 0) ns = 0;
  char buf[32];
  const int n = std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000),
                              static_cast<long long>(ns % 1000));
  w.RawValue(buf, static_cast<size_t>(n), rapidjson::kNumberType);
}

// {"name", "cat", "ph", "ts", "pid", "tid" (the object left open).
void write_common(JsonWriter& w, const TraceRecord& r, char ph, int64_t ts_ns) {
  w.StartObject();
  w.Key("name");
  write_string(w, r.name);
  w.Key("cat");
  write_string(w, r.cat);
  w.Key("ph");
  w.String(&ph, 1);
  w.Key("ts");
  write_us(w, ts_ns);
  w.Key("pid");
  w.Int(1);
  w.Key("tid");
  w.Uint(r.tid);
}

// r.args is an object the JSON writer of to_record (or a test) wrote.
void write_args(JsonWriter& w, const std::string& args) {
  if (args.empty()) return;
  w.Key("args");
  w.RawValue(args.data(), args.size(), rapidjson::kObjectType);
}

void write_record(JsonWriter& w, const TraceRecord& r) {
  switch (r.ph) {
    case 'X':
      write_common(w, r, 'X', r.ts_ns);
      w.Key("dur");
      write_us(w, r.dur_ns);
      break;
    case 'b': {  // an async span: a b/e pair, args on the b
      char id[24];
      const int n = std::snprintf(id, sizeof id, "0x%llx", static_cast<unsigned long long>(r.id));
      write_common(w, r, 'b', r.ts_ns);
      w.Key("id");
      w.String(id, static_cast<rapidjson::SizeType>(n));
      write_args(w, r.args);
      w.EndObject();
      write_common(w, r, 'e', r.ts_ns + r.dur_ns);
      w.Key("id");
      w.String(id, static_cast<rapidjson::SizeType>(n));
      w.EndObject();
      return;
    }
    case 's':
    case 'f':
      write_common(w, r, r.ph, r.ts_ns);
      w.Key("id");
      w.Uint64(r.id);
      if (r.ph == 'f') {
        w.Key("bp");
        w.String("e");
      }
      break;
    default:
      return;
  }
  write_args(w, r.args);
  w.EndObject();
}

// A record's args object, key by key.
class ArgsWriter {
 public:
  ArgsWriter() : w_(sb_) { w_.StartObject(); }
  ArgsWriter& add(const char* key, std::string_view value) {
    w_.Key(key);
    write_string(w_, value);
    return *this;
  }
  ArgsWriter& add(const char* key, const std::vector<std::string>& values) {
    w_.Key(key);
    w_.StartArray();
    for (const auto& v : values) write_string(w_, v);
    w_.EndArray();
    return *this;
  }
  // {"job", "tenant", "partition"}: every job record's args start so.
  ArgsWriter& job(std::string_view job, std::string_view tenant, std::string_view partition) {
    return add("job", job).add("tenant", tenant).add("partition", partition);
  }
  std::string done() {
    w_.EndObject();
    return std::string(sb_.GetString(), sb_.GetSize());
  }

 private:
  rapidjson::StringBuffer sb_;
  JsonWriter w_;
};

std::string job_name(uint64_t n, std::string_view job_id) {
  return job_id.empty() ? "job-" + std::to_string(n) : std::string(job_id);
}

std::string hex16(uint64_t v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[static_cast<size_t>(i)] = kHex[v & 15];
    v >>= 4;
  }
  return out;
}

// By the ring's uid, not its address: a ring destroyed and another made at
// the same address (tests) must not inherit the thread's lane.
struct LaneCache {
  uint64_t owner = 0;
  uint32_t tid = 0;
};
thread_local LaneCache tls_lane;

// A record that cannot be rendered (its data is gone): snapshot() drops it.
TraceRecord skipped() {
  TraceRecord r;
  r.ph = '?';
  return r;
}

// The slow path's data: a whole record.
struct RecordData : TraceData {
  explicit RecordData(TraceRecord r) : rec(std::move(r)) {}
  TraceRecord rec;
};

}  // namespace

bool trace_job_number(std::string_view id, uint64_t& n) {
  if (id.size() < 5 || id.size() > 24 || id.substr(0, 4) != "job-") return false;
  std::string_view digits = id.substr(4);
  if (digits.size() > 1 && digits[0] == '0') return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  auto res = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  return res.ec == std::errc() && res.ptr == digits.data() + digits.size();
}

void TraceData::touch(uint64_t seq) const {
  uint64_t cur = last_seq.load(std::memory_order_relaxed);
  while (cur < seq && !last_seq.compare_exchange_weak(cur, seq, std::memory_order_release, std::memory_order_relaxed)) {
  }
}

TraceBuffer& TraceBuffer::global() {
  // Leaked on purpose: runner threads may trace during exit.
  static auto* buffer = new TraceBuffer(kDefaultCapacity);
  return *buffer;
}

std::atomic<uint64_t> TraceBuffer::next_uid_{1};

TraceBuffer::TraceBuffer(size_t capacity)
    : capacity_(capacity), uid_(next_uid_.fetch_add(1)), slots_(capacity ? new Slot[capacity] : nullptr) {
  epoch();
  interns();
}

TraceBuffer::~TraceBuffer() = default;

int64_t TraceBuffer::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - epoch()).count();
}

int64_t TraceBuffer::ns_of(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - epoch()).count();
}

bool TraceBuffer::intern(std::string_view s, uint32_t& id, uint32_t limit) {
  if (s.empty()) {
    id = 0;
    return true;
  }
  for (const auto& e : tls_interns) {
    if (e.s != nullptr && *e.s == s) {
      id = e.id;
      return true;
    }
  }
  InternTable& t = interns();
  const std::string* str = nullptr;
  {
    std::lock_guard lock(t.mu);
    auto it = t.ids.find(s);
    if (it != t.ids.end()) {
      id = it->second;
      str = &t.strings[id];
    } else {
      if (t.strings.size() >= limit) return false;
      id = static_cast<uint32_t>(t.strings.size());
      str = &t.strings.emplace_back(s);
      t.ids.emplace(*str, id);
    }
  }
  tls_interns[tls_intern_next++ % tls_interns.size()] = InternCacheEntry{str, id};
  return true;
}

std::string TraceBuffer::interned(uint32_t id) {
  InternTable& t = interns();
  std::lock_guard lock(t.mu);
  return id < t.strings.size() ? t.strings[id] : std::string();
}

uint64_t TraceBuffer::add(const TraceEvent& e) {
  return add(&e, 1);
}

uint64_t TraceBuffer::add(const TraceEvent* es, size_t n) {
  if (!enabled() || n == 0) return 0;
  const uint64_t first = next_.fetch_add(n, std::memory_order_relaxed);
  for (size_t k = 0; k < n; ++k) write_slot(first + k, es[k]);
  return first + n;
}

void TraceBuffer::write_slot(uint64_t idx, const TraceEvent& e) {
  Slot& s = slots_[idx % capacity_];
  const uint64_t mine = 2 * idx + 1;
  uint64_t cur = s.seq.load(std::memory_order_relaxed);
  for (;;) {
    if (cur >= mine) return;  // a writer a lap ahead took the slot: ours is overwritten already
    if (cur & 1) {            // another writer is in it (one a lap behind): wait for it
      std::this_thread::yield();
      cur = s.seq.load(std::memory_order_relaxed);
      continue;
    }
    if (s.seq.compare_exchange_weak(cur, mine, std::memory_order_acquire, std::memory_order_relaxed)) break;
  }
  std::atomic_thread_fence(std::memory_order_release);
  uint64_t w[Slot::kWords];
  std::memcpy(w, &e, sizeof w);
  for (size_t i = 0; i < Slot::kWords; ++i) s.words[i].store(w[i], std::memory_order_relaxed);
  s.seq.store(mine + 1, std::memory_order_release);
}

bool TraceBuffer::read_slot(uint64_t idx, TraceEvent& out) const {
  const Slot& s = slots_[idx % capacity_];
  const uint64_t want = 2 * idx + 2;
  for (int tries = 0; tries < 1000; ++tries) {
    const uint64_t s1 = s.seq.load(std::memory_order_acquire);
    if (s1 + 1 == want || (s1 < want && tries < 10)) {  // being written, or claimed and about to be
      std::this_thread::yield();
      continue;
    }
    if (s1 != want) return false;  // overwritten, or still not written
    uint64_t w[Slot::kWords];
    for (size_t i = 0; i < Slot::kWords; ++i) w[i] = s.words[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) != want) return false;
    std::memcpy(&out, w, sizeof w);
    return true;
  }
  return false;
}

void TraceBuffer::add(TraceRecord r) {
  if (!enabled()) return;
  auto d = std::make_shared<RecordData>(std::move(r));
  d->last_seq.store(UINT64_MAX, std::memory_order_relaxed);  // until its record is written
  retain(d);
  TraceEvent e;
  e.kind = TraceKind::kRecord;
  e.data = d->serial;
  d->last_seq.store(add(e), std::memory_order_release);
}

void TraceBuffer::retain(const std::shared_ptr<TraceData>& d) {
  std::vector<std::shared_ptr<const TraceData>> dead;  // freed outside the lock
  std::lock_guard lock(data_mu_);
  d->serial = ++next_serial_;
  data_.push_back(d);
  if (data_.size() >= collect_at_) collect_locked(dead);
}

void TraceBuffer::collect_locked(std::vector<std::shared_ptr<const TraceData>>& dead) {
  const uint64_t head = next_.load(std::memory_order_relaxed);
  auto keep = [&](const std::shared_ptr<const TraceData>& d) {
    if (d.use_count() > 1) return true;  // a running job, a graph's cache
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t last = d->last_seq.load(std::memory_order_acquire);
    return last > head || head - last < capacity_;  // a record may still be in the ring
  };
  size_t out = 0;
  for (size_t i = 0; i < data_.size(); ++i) {
    if (keep(data_[i])) {
      if (out != i) data_[out] = std::move(data_[i]);
      ++out;
    } else {
      dead.push_back(std::move(data_[i]));
    }
  }
  data_.resize(out);
  collect_at_ = std::max<size_t>(256, 2 * data_.size());
}

size_t TraceBuffer::retained() const {
  std::lock_guard lock(data_mu_);
  return data_.size();
}

uint32_t TraceBuffer::lane(std::string_view name, std::string_view suffix) {
  if (tls_lane.owner == uid_) return tls_lane.tid;
  std::lock_guard lock(data_mu_);
  std::string full(name);
  full += suffix;
  lane_names_.push_back(full + " #" + std::to_string(lane_names_.size() + 1));
  tls_lane.owner = uid_;
  tls_lane.tid = static_cast<uint32_t>(lane_names_.size());
  return tls_lane.tid;
}

TraceRecord TraceBuffer::to_record(const TraceEvent& e, const TraceData* d, const Strings& s) {
  if (e.kind == TraceKind::kRecord) {
    const auto* rd = dynamic_cast<const RecordData*>(d);
    return rd ? rd->rec : TraceRecord{};
  }
  TraceRecord r;
  r.ts_ns = e.ts_ns;
  r.dur_ns = e.dur_ns;
  r.tid = e.tid;
  r.tenant = s.tenant.empty() ? interned(e.tenant) : std::string(s.tenant);
  const std::string partition = s.partition.empty() ? interned(e.partition) : std::string(s.partition);
  const std::string job = job_name(e.job, s.job_id);
  const std::string_view request_id = s.request_id, jobs = s.jobs;
  switch (e.kind) {
    case TraceKind::kRequest: {
      r.ph = 'X';
      r.name = interned(e.name);
      r.cat = "request";
      ArgsWriter a;
      a.add("request_id", request_id.empty() ? hex16(e.data) : std::string(request_id));
      if (!jobs.empty()) {
        a.add("jobs", jobs);
      } else if (e.flags & TraceEvent::kHasJob) {
        a.add("jobs", job);
      }
      r.args = a.done();
      break;
    }
    case TraceKind::kFlowStart:
    case TraceKind::kFlowEnd:
      r.ph = e.kind == TraceKind::kFlowStart ? 's' : 'f';
      r.name = e.flags & TraceEvent::kOpsFlow ? "ops" : "job";
      r.cat = "flow";
      r.id = 2 * e.job + (e.flags & TraceEvent::kOpsFlow ? 1 : 0);
      break;
    case TraceKind::kSubmit:
      r.name = "submit " + job;
      r.cat = "request";
      r.args = ArgsWriter().job(job, r.tenant, partition).done();
      break;
    case TraceKind::kRejected:
      r.name = "rejected " + job;
      r.cat = "job";
      r.args = ArgsWriter().job(job, r.tenant, partition).done();
      break;
    case TraceKind::kQueued:
      r.ph = 'b';
      r.name = "queued " + job;
      r.cat = "queue";
      r.id = e.job;
      r.args = ArgsWriter().job(job, r.tenant, partition).done();
      break;
    case TraceKind::kRun: {
      r.name = "run " + job;
      r.cat = "job";
      ArgsWriter a;
      a.job(job, r.tenant, partition).add("state", interned(e.name));
      const auto* t = dynamic_cast<const TraceTable*>(d);
      if (t != nullptr && !t->graph.empty()) a.add("graph", t->graph);
      r.args = a.done();
      break;
    }
    case TraceKind::kEnded:
      r.name = interned(e.name) + " " + job;
      r.cat = "job";
      r.args = ArgsWriter().job(job, r.tenant, partition).done();
      break;
    case TraceKind::kOp: {
      const auto* t = dynamic_cast<const TraceTable*>(d);
      if (t == nullptr || e.index >= t->nodes.size()) return skipped();
      const TraceTable::Node& n = t->nodes[e.index];
      r.name = n.name;
      r.cat = "op";
      ArgsWriter a;
      a.add("node", n.id).add("op", n.op).add("job", job);
      if (!t->graph.empty()) a.add("graph", t->graph);
      r.args = a.add("inputs", n.inputs).add("outputs", n.outputs).done();
      break;
    }
    default:
      return skipped();
  }
  return r;
}

std::vector<TraceRecord> TraceBuffer::snapshot(size_t last,
                                               const std::function<bool(const TraceRecord&)>& visible) const {
  std::vector<TraceRecord> out;
  if (capacity_ == 0 || last == 0) return out;
  // Copy the ring first (newest first), then the registry: any data a copied
  // record refers to was registered before the record was written.
  const uint64_t head = next_.load(std::memory_order_acquire);
  const uint64_t n = std::min<uint64_t>(head, capacity_);
  std::vector<TraceEvent> events;
  events.reserve(static_cast<size_t>(n));
  for (uint64_t k = 0; k < n; ++k) {
    TraceEvent e;
    if (read_slot(head - 1 - k, e)) events.push_back(e);
  }
  // Only the data the copied records refer to: holding every registered
  // entry while rendering would make a collection running meanwhile keep
  // them all (and double its threshold), so a reader polling /v1/trace
  // could grow the registry without bound.
  std::vector<uint64_t> serials;
  for (const TraceEvent& e : events) {
    if (e.kind == TraceKind::kRecord || e.kind == TraceKind::kOp || (e.kind == TraceKind::kRun && e.data != 0)) {
      serials.push_back(e.data);
    }
  }
  std::sort(serials.begin(), serials.end());
  serials.erase(std::unique(serials.begin(), serials.end()), serials.end());
  std::vector<std::shared_ptr<const TraceData>> data;
  data.reserve(serials.size());
  {
    std::lock_guard lock(data_mu_);
    auto from = data_.begin();
    for (uint64_t serial : serials) {
      from = std::lower_bound(from, data_.end(), serial,
                              [](const std::shared_ptr<const TraceData>& d, uint64_t v) { return d->serial < v; });
      if (from == data_.end()) break;
      if ((*from)->serial == serial) data.push_back(*from);
    }
  }
  auto find = [&](uint64_t serial) -> const TraceData* {
    auto it = std::lower_bound(data.begin(), data.end(), serial,
                               [](const std::shared_ptr<const TraceData>& d, uint64_t s) { return d->serial < s; });
    return it != data.end() && (*it)->serial == serial ? it->get() : nullptr;
  };
  for (const TraceEvent& e : events) {
    if (out.size() >= last) break;
    const TraceData* d = nullptr;
    if (e.kind == TraceKind::kRecord || e.kind == TraceKind::kOp || (e.kind == TraceKind::kRun && e.data != 0)) {
      d = find(e.data);
      if (d == nullptr) continue;  // freed since, so the record was overwritten since it was copied
    }
    TraceRecord r = to_record(e, d);
    if (r.ph == '?') continue;
    if (!visible || visible(r)) out.push_back(std::move(r));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::string TraceBuffer::render_json(size_t last, const std::string& tenant, bool see_all) const {
  auto records =
      snapshot(last, [&](const TraceRecord& r) { return see_all || (!tenant.empty() && r.tenant == tenant); });
  std::vector<std::string> lanes;
  {
    std::lock_guard lock(data_mu_);
    lanes = lane_names_;
  }
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  // Metadata first: the process's name, then every lane's (tid i + 1).
  auto meta = [&w](const char* what, size_t tid, std::string_view name) {
    w.StartObject();
    w.Key("name");
    w.String(what);
    w.Key("ph");
    w.String("M");
    w.Key("pid");
    w.Int(1);
    w.Key("tid");
    w.Uint64(tid);
    w.Key("args");
    w.StartObject();
    w.Key("name");
    write_string(w, name);
    w.EndObject();
    w.EndObject();
  };
  w.StartObject();
  w.Key("traceEvents");
  w.StartArray();
  meta("process_name", 0, "tensord");
  for (size_t i = 0; i < lanes.size(); ++i) meta("thread_name", i + 1, lanes[i]);
  for (const auto& r : records) write_record(w, r);
  w.EndArray();
  w.Key("displayTimeUnit");
  w.String("ms");
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

}  // namespace tensord
