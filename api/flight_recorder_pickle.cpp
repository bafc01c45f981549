#include "api/flight_recorder_pickle.h"

#include "api/flight_recorder_json.h"
#include "api/pickle_writer.h"

namespace tensord::dist {

namespace {

// A rough size per entry, so the output grows once or twice, not per entry.
constexpr size_t kBytesPerEntry = 640;

void sizes(PickleWriter& w, const std::vector<Shape>& shapes) {
  w.begin_list();
  for (const auto& s : shapes) {
    w.begin_list();
    for (int64_t d : s) w.int64(d);
    w.end_list();
  }
  w.end_list();
}

void dtypes(PickleWriter& w, const std::vector<DType>& ts) {
  w.begin_list();
  for (DType t : ts) w.str(pytorch_scalar_type_name(t));
  w.end_list();
}

void optional_ns(PickleWriter& w, const std::optional<int64_t>& t) {
  // PyTorch's pickle has None for a time not (yet) discovered.
  if (t) {
    w.int64(*t);
  } else {
    w.none();
  }
}

void entry(PickleWriter& w, const FlightRecord& e) {
  w.begin_dict();
  w.str("record_id");
  w.uint64(e.record_id);
  w.str("pg_id");
  w.int64(e.pg_id);
  // A tuple, as PyTorch's pickle has it (its JSON has a list).
  w.str("process_group");
  w.begin_tuple();
  w.str(e.pg_name);
  w.str(e.pg_desc);
  w.end_tuple();
  w.str("collective_seq_id");
  w.uint64(e.collective_seq_id);
  w.str("p2p_seq_id");
  w.uint64(e.p2p_seq_id);
  w.str("op_id");
  w.uint64(e.op_id);
  w.str("profiling_name");
  w.str(e.profiling_name);
  w.str("time_created_ns");
  w.int64(e.time_created_ns);
  w.str("input_sizes");
  sizes(w, e.input_sizes);
  w.str("input_dtypes");
  dtypes(w, e.input_dtypes);
  w.str("output_sizes");
  sizes(w, e.output_sizes);
  w.str("output_dtypes");
  dtypes(w, e.output_dtypes);
  w.str("state");
  w.str(collective_state_name(e.state()));
  w.str("time_discovered_started_ns");
  optional_ns(w, e.time_discovered_started_ns);
  w.str("time_discovered_completed_ns");
  optional_ns(w, e.time_discovered_completed_ns);
  w.str("retired");
  w.boolean(e.retired);
  w.str("timeout_ms");
  w.int64(e.timeout_ms);
  w.str("is_p2p");
  w.boolean(e.is_p2p);
  // No Python stack behind a tensord collective: an empty list, which
  // fr_trace prints as an empty stack trace.
  w.str("frames");
  w.begin_list();
  w.end_list();
  w.end_dict();
}

}  // namespace

std::string flight_recorder_pickle(const FlightRecorderDump& dump) {
  PickleWriter w(dump.entries.size() * kBytesPerEntry);
  w.begin_dict();
  w.str("version");
  w.str(dump.version);
  w.str("comm_lib_version");
  w.str(dump.comm_lib_version);
  // Not in PyTorch's file (fr_trace takes the rank from the file's name):
  // for a reader who has the bytes without the name.
  w.str("rank");
  w.int64(dump.rank);
  // Keyed by group name, the key each entry's process_group[0] refers to.
  w.str("pg_config");
  w.begin_dict();
  for (const auto& g : dump.groups) {
    w.str(g.name);
    w.begin_dict();
    w.str("name");
    w.str(g.name);
    w.str("desc");
    w.str(g.desc);
    w.str("ranks");
    w.str(pytorch_ranks_str(g.ranks));
    w.end_dict();
  }
  w.end_dict();
  // Ints, as PyTorch's pickle has them (its JSON has strings); keyed like
  // pg_config and like the JSON dump's pg_status.
  w.str("pg_status");
  w.begin_dict();
  for (const auto& g : dump.groups) {
    w.str(g.name);
    w.begin_dict();
    w.str("last_enqueued_collective");
    w.int64(g.last_enqueued_collective);
    w.str("last_started_collective");
    w.int64(g.last_started_collective);
    w.str("last_completed_collective");
    w.int64(g.last_completed_collective);
    w.end_dict();
  }
  w.end_dict();
  w.str("entries");
  w.begin_list();
  for (const auto& e : dump.entries) entry(w, e);
  w.end_list();
  w.end_dict();
  return w.finish();
}

}  // namespace tensord::dist
