#include "api/ops_json.h"

#include <algorithm>

#include "api/json_writer.h"

namespace tensord {

OpListing op_listing(const OpDef& op) {
  OpListing l;
  l.name = op.name;
  l.signature = op.signature();
  l.doc = op.doc;
  l.dtypes = op.dtypes;
  l.dtype_note = op.dtype_note;
  l.params = op.params;
  l.outputs = op.outputs;
  l.in_place = op.mutates >= 0;
  for (const auto& [backend, kernel] : op.kernels) l.backends.push_back(backend);
  return l;
}

OpListing op_listing(const ControlFlowOpSpec& op, std::vector<std::string> backends) {
  OpListing l;
  l.name = op.name;
  l.signature = op.signature;
  l.doc = op.doc;
  l.dtypes = op.dtypes;
  l.dtype_note = op.dtype_note;
  l.params = op.params;
  l.outputs = op.outputs;
  l.backends = std::move(backends);
  l.subprograms = op.subprograms;
  return l;
}

namespace {

void write_strings(JsonWriter& w, const std::vector<std::string>& v) {
  w.StartArray();
  for (const auto& s : v) write_string(w, s);
  w.EndArray();
}

void write_param(JsonWriter& w, const ParamSpec& p) {
  w.StartObject();
  w.Key("name");
  write_string(w, p.name);
  w.Key("type");
  write_string(w, param_kind_name(p.kind));
  w.Key("required");
  w.Bool(p.default_value.is_none() && !p.optional);
  if (!p.default_value.is_none()) {
    w.Key("default");
    write_string(w, p.default_value.repr());
  }
  w.Key("kwarg_only");
  w.Bool(p.kwarg_only);
  w.EndObject();
}

void write_op(JsonWriter& w, const OpListing& op) {
  w.StartObject();
  w.Key("name");
  write_string(w, op.name);
  w.Key("signature");
  write_string(w, op.signature);
  w.Key("doc");
  write_string(w, op.doc);
  w.Key("dtypes");
  w.StartArray();
  for (DType t : op.dtypes) write_string(w, dtype_name(t));
  w.EndArray();
  w.Key("dtype_note");
  write_string(w, op.dtype_note);
  w.Key("params");
  w.StartArray();
  for (const auto& p : op.params) write_param(w, p);
  w.EndArray();
  w.Key("outputs");
  write_strings(w, op.outputs);
  w.Key("in_place");
  w.Bool(op.in_place);
  w.Key("backends");
  write_strings(w, op.backends);
  w.Key("subprograms");
  write_strings(w, op.subprograms);
  w.EndObject();
}

}  // namespace

std::string ops_to_json(std::vector<OpListing> ops) {
  std::sort(ops.begin(), ops.end(), [](const OpListing& a, const OpListing& b) { return a.name < b.name; });
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("ops");
  w.StartArray();
  for (const auto& op : ops) write_op(w, op);
  w.EndArray();
  w.EndObject();
  return json_text(sb);
}

}  // namespace tensord
