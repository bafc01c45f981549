#include "api/flight_recorder_json.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace tensord::dist {

std::string_view pytorch_scalar_type_name(DType t) {
  switch (t) {
    case DType::kBool:
      return "Bool";
    case DType::kUInt8:
      return "Byte";
    case DType::kInt8:
      return "Char";
    case DType::kInt16:
      return "Short";
    case DType::kInt32:
      return "Int";
    case DType::kInt64:
      return "Long";
    case DType::kFloat16:
      return "Half";
    case DType::kBFloat16:
      return "BFloat16";
    case DType::kFloat32:
      return "Float";
    case DType::kFloat64:
      return "Double";
    case DType::kComplex64:
      return "ComplexFloat";
    case DType::kComplex128:
      return "ComplexDouble";
    case DType::kFloat8E4M3FN:
      return "Float8_e4m3fn";
    case DType::kFloat8E5M2:
      return "Float8_e5m2";
    case DType::kFloat8E8M0FNU:
      return "Float8_e8m0fnu";
  }
  return "Undefined";
}

std::string pytorch_ranks_str(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(ranks[i]);
  }
  return s + "]";
}

namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void str(Writer& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

void key(Writer& w, std::string_view k) {
  w.Key(k.data(), static_cast<rapidjson::SizeType>(k.size()));
}

void sizes(Writer& w, const std::vector<Shape>& shapes) {
  w.StartArray();
  for (const auto& s : shapes) {
    w.StartArray();
    for (int64_t d : s) w.Int64(d);
    w.EndArray();
  }
  w.EndArray();
}

void dtypes(Writer& w, const std::vector<DType>& ts) {
  w.StartArray();
  for (DType t : ts) str(w, pytorch_scalar_type_name(t));
  w.EndArray();
}

void entry(Writer& w, const FlightRecord& e, int rank) {
  w.StartObject();
  key(w, "record_id");
  w.Uint64(e.record_id);
  key(w, "pg_id");
  w.Int64(e.pg_id);
  key(w, "process_group");
  w.StartArray();
  str(w, e.pg_name);
  str(w, e.pg_desc);
  w.EndArray();
  key(w, "collective_seq_id");
  w.Uint64(e.collective_seq_id);
  key(w, "p2p_seq_id");
  w.Uint64(e.p2p_seq_id);
  key(w, "op_id");
  w.Uint64(e.op_id);
  key(w, "profiling_name");
  str(w, e.profiling_name);
  key(w, "time_created_ns");
  w.Int64(e.time_created_ns);
  key(w, "input_sizes");
  sizes(w, e.input_sizes);
  key(w, "input_dtypes");
  dtypes(w, e.input_dtypes);
  key(w, "output_sizes");
  sizes(w, e.output_sizes);
  key(w, "output_dtypes");
  dtypes(w, e.output_dtypes);
  key(w, "state");
  str(w, collective_state_name(e.state()));
  // PyTorch's JSON dump writes 0 for a time not (yet) discovered.
  key(w, "time_discovered_started_ns");
  w.Int64(e.time_discovered_started_ns.value_or(0));
  key(w, "time_discovered_completed_ns");
  w.Int64(e.time_discovered_completed_ns.value_or(0));
  key(w, "retired");
  w.Bool(e.retired);
  key(w, "timeout_ms");
  w.Int64(e.timeout_ms);
  key(w, "is_p2p");
  w.Bool(e.is_p2p);
  key(w, "rank");
  w.Int(rank);
  w.EndObject();
}

void write_dump(Writer& w, const FlightRecorderDump& dump) {
  w.StartObject();
  key(w, "version");
  str(w, dump.version);
  key(w, "comm_lib_version");
  str(w, dump.comm_lib_version);
  key(w, "rank");
  w.Int(dump.rank);
  // pg_config and pg_status are both keyed by the group's name (PyTorch
  // keys pg_status by pg_id, which is the name of its default groups).
  key(w, "pg_config");
  w.StartObject();
  for (const auto& g : dump.groups) {
    key(w, g.name);
    w.StartObject();
    key(w, "name");
    str(w, g.name);
    key(w, "desc");
    str(w, g.desc);
    key(w, "ranks");
    str(w, pytorch_ranks_str(g.ranks));
    w.EndObject();
  }
  w.EndObject();
  key(w, "pg_status");
  w.StartObject();
  for (const auto& g : dump.groups) {
    key(w, g.name);
    w.StartObject();
    // Strings, as PyTorch's JSON dump has them.
    key(w, "last_enqueued_collective");
    str(w, std::to_string(g.last_enqueued_collective));
    key(w, "last_started_collective");
    str(w, std::to_string(g.last_started_collective));
    key(w, "last_completed_collective");
    str(w, std::to_string(g.last_completed_collective));
    w.EndObject();
  }
  w.EndObject();
  key(w, "entries");
  w.StartArray();
  for (const auto& e : dump.entries) entry(w, e, dump.rank);
  w.EndArray();
  w.EndObject();
}

}  // namespace

std::string flight_recorder_json(const FlightRecorderDump& dump) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  write_dump(w, dump);
  return std::string(buf.GetString(), buf.GetSize());
}

std::string flight_recorder_ranks_json(const std::vector<FlightRecorderDump>& dumps) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  key(w, "ranks");
  w.StartObject();
  for (const auto& d : dumps) {
    key(w, std::to_string(d.rank));
    write_dump(w, d);
  }
  w.EndObject();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace tensord::dist
