#include "api/program_json.h"

#include <memory>

#include "api/deferred_b64.h"
#include "api/json_document.h"
#include "api/json_parse.h"
#include "api/json_tensor.h"
#include "api/json_writer.h"
#include "api/sha256.h"
#include "metrics/utf8.h"
#include "ops/error.h"

namespace tensord {
namespace {

[[noreturn]] void bad(const std::string& msg) {
  throw Error(ErrorCode::kBadRequest, msg);
}

std::string str_field(const rapidjson::Value& o, const char* key, const std::string& where, bool required) {
  auto it = o.FindMember(key);
  if (it == o.MemberEnd()) {
    if (required) bad(where + ": missing \"" + key + "\"");
    return {};
  }
  if (!it->value.IsString()) bad(where + ": \"" + key + "\" must be a string");
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

std::vector<std::string> str_list(const rapidjson::Value& v, const std::string& where) {
  if (!v.IsArray()) bad(where + " must be a list of names");
  std::vector<std::string> out;
  for (const auto& e : v.GetArray()) {
    if (!e.IsString()) bad(where + " must be a list of names");
    out.emplace_back(e.GetString(), e.GetStringLength());
  }
  return out;
}

TensorMeta meta_from_json(const rapidjson::Value& v, const std::string& where) {
  if (!v.IsObject()) bad(where + ": expected {\"dtype\", \"shape\"}");
  std::string dt = str_field(v, "dtype", where, true);
  auto t = dtype_from_name(dt);
  if (!t) bad(where + ": unknown dtype '" + dt + "'");
  auto it = v.FindMember("shape");
  if (it == v.MemberEnd() || !it->value.IsArray()) bad(where + ": \"shape\" must be a list of ints");
  TensorMeta m;
  m.dtype = *t;
  for (const auto& d : it->value.GetArray()) {
    if (!d.IsInt64()) bad(where + ": \"shape\" must be a list of ints");
    m.shape.push_back(d.GetInt64());
  }
  try {
    shape_numel(m.shape);
  } catch (const Error& e) {
    bad(where + ": " + e.message());
  }
  return m;
}

ArgExpr arg_from_json(const rapidjson::Value& v, const std::string& where) {
  ArgExpr a;
  if (v.IsNull()) {
    a.kind = ArgExpr::Kind::kNull;
  } else if (v.IsString()) {
    a.kind = ArgExpr::Kind::kString;
    a.str.assign(v.GetString(), v.GetStringLength());
  } else if (v.IsBool()) {
    a.kind = ArgExpr::Kind::kLiteral;
    a.literal = Attr(v.GetBool());
  } else if (v.IsInt64()) {
    a.kind = ArgExpr::Kind::kLiteral;
    a.literal = Attr(v.GetInt64());
  } else if (v.IsNumber()) {
    a.kind = ArgExpr::Kind::kLiteral;
    a.literal = Attr(v.GetDouble());
  } else if (v.IsObject()) {
    a.kind = ArgExpr::Kind::kTensor;
    a.tensor = tensor_from_json(v, where);
  } else if (v.IsArray()) {
    const auto arr = v.GetArray();
    bool all_str = true, all_int = true, all_num = true;
    for (const auto& e : arr) {
      all_str &= e.IsString();
      all_int &= e.IsInt64();
      all_num &= e.IsNumber();
    }
    if (arr.Empty() || all_str) {
      a.kind = ArgExpr::Kind::kStringList;
      for (const auto& e : arr) a.strs.emplace_back(e.GetString(), e.GetStringLength());
    } else if (all_int) {
      a.kind = ArgExpr::Kind::kLiteral;
      std::vector<int64_t> l;
      for (const auto& e : arr) l.push_back(e.GetInt64());
      a.literal = Attr(std::move(l));
    } else if (all_num) {
      a.kind = ArgExpr::Kind::kLiteral;
      std::vector<double> l;
      for (const auto& e : arr) l.push_back(e.GetDouble());
      a.literal = Attr(std::move(l));
    } else {
      bad(where + ": a list argument must hold only names or only numbers");
    }
  } else {
    bad(where + ": unsupported argument");
  }
  return a;
}

Node node_from_json(const rapidjson::Value& v, size_t index, int depth) {
  std::string where = "nodes[" + std::to_string(index) + "]";
  if (!v.IsObject()) bad(where + " must be an object");
  Node n;
  n.id = str_field(v, "id", where, true);
  if (n.id.empty() || n.id.size() > 256) bad(where + ": \"id\" must be 1..256 bytes");
  where = "node '" + n.id + "'";
  n.op = str_field(v, "op", where, true);
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    std::string key(it->name.GetString(), it->name.GetStringLength());
    if (key == "id" || key == "op") continue;
    if (key == "args") {
      if (!it->value.IsArray()) bad(where + ": \"args\" must be a list");
      size_t k = 0;
      for (const auto& a : it->value.GetArray())
        n.args.push_back(arg_from_json(a, where + " args[" + std::to_string(k++) + "]"));
    } else if (key == "kwargs") {
      if (!it->value.IsObject()) bad(where + ": \"kwargs\" must be an object");
      for (auto kw = it->value.MemberBegin(); kw != it->value.MemberEnd(); ++kw) {
        std::string name(kw->name.GetString(), kw->name.GetStringLength());
        n.kwargs.emplace_back(name, arg_from_json(kw->value, where + " kwargs." + name));
      }
    } else if (key == "outputs") {
      n.outputs = str_list(it->value, where + ": \"outputs\"");
    } else if (key == "then" || key == "else" || key == "cond" || key == "body" || key == "combine_fn") {
      n.subprograms[key] = std::make_shared<Program>(program_from_json(it->value, depth + 1));
    } else {
      bad(where + ": unknown field \"" + key + "\"");
    }
  }
  return n;
}

// The "backend" object: the same for every job of a server (the engine's
// one libraries map), so written once per thread and then copied as it was
// written.
const std::string& backend_json(const JobResult& r) {
  struct Cached {
    std::shared_ptr<const std::map<std::string, std::string>> libraries;  // held: its address stays its own
    std::string backend;
    std::string json;
  };
  thread_local Cached cache;
  if (cache.json.empty() || cache.libraries != r.libraries || cache.backend != r.backend) {
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    w.Key("name");
    w.String(r.backend);
    w.Key("libraries");
    w.StartObject();
    if (r.libraries) {
      for (const auto& [k, v] : *r.libraries) {
        w.Key(k.c_str(), static_cast<rapidjson::SizeType>(k.size()));
        w.String(v);
      }
    }
    w.EndObject();
    w.EndObject();
    cache = {r.libraries, r.backend, std::string(sb.GetString(), sb.GetSize())};
  }
  return cache.json;
}

void write_job(JsonWriter& w, const JobResult& r) {
  w.Key("job");
  w.StartObject();
  w.Key("id");
  w.String(r.id);
  w.Key("queue_ms");
  w.Double(r.queue_ms);
  w.Key("run_ms");
  w.Double(r.run_ms);
  w.Key("partition");
  w.String(r.partition);
  w.Key("program_sha256");
  w.String(r.program_sha256);
  w.Key("plan_peak_bytes");
  w.Int64(r.plan_peak_bytes);
  w.Key("backend");
  const std::string& backend = backend_json(r);
  w.RawValue(backend.data(), backend.size(), rapidjson::kObjectType);
  w.EndObject();
}

}  // namespace

rapidjson::Document parse_json_object(std::string_view body, const char* what) {
  rapidjson::Document d;
  parse_json(body, d, what);
  if (!d.IsObject()) bad(std::string(what) + ": expected a JSON object");
  return d;
}

rapidjson::Document parse_json_object_insitu(std::string& body, const char* what) {
  rapidjson::Document d;
  parse_json_object_insitu(body, d, what);
  return d;
}

void parse_json_object_insitu(std::string& body, rapidjson::Document& d, const char* what) {
  parse_json_insitu(body, d, what);
  if (!d.IsObject()) bad(std::string(what) + ": expected a JSON object");
}

Program program_from_json(const rapidjson::Value& v, int depth) {
  if (depth > 32) bad("program: subprograms nested deeper than 32");
  if (!v.IsObject()) bad("program must be an object");
  Program p;
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    std::string key(it->name.GetString(), it->name.GetStringLength());
    if (key == "inputs") {
      if (!it->value.IsObject()) bad("program.inputs must be an object of {dtype, shape}");
      for (auto in = it->value.MemberBegin(); in != it->value.MemberEnd(); ++in) {
        std::string name(in->name.GetString(), in->name.GetStringLength());
        for (const auto& prev : p.inputs) {
          if (prev.name == name) throw Error(ErrorCode::kInvalidProgram, "duplicate input name '" + name + "'");
        }
        const std::string where = "program.inputs." + name;
        if (in->value.IsObject() && !in->value.HasMember("shape")) {
          // A dtype alone: the input's shape is its own (API.md 8).
          const std::string dt = str_field(in->value, "dtype", where, true);
          auto t = dtype_from_name(dt);
          if (!t) bad(where + ": unknown dtype '" + dt + "'");
          p.inputs.push_back(ProgramInput{name, TensorMeta{*t, {}}, true});
        } else {
          p.inputs.push_back(ProgramInput{name, meta_from_json(in->value, where)});
        }
      }
    } else if (key == "nodes") {
      if (!it->value.IsArray()) bad("program.nodes must be a list");
      size_t i = 0;
      for (const auto& n : it->value.GetArray()) p.nodes.push_back(node_from_json(n, i++, depth));
    } else if (key == "outputs") {
      p.outputs = str_list(it->value, "program.outputs");
    } else {
      bad("program: unknown field \"" + key + "\"");
    }
  }
  return p;
}

namespace {
// {"per_rank": [t0, t1, ...]} or {"shard": t, "dim": d} (API.md 8).
SpmdInput spmd_input_from_json(const rapidjson::Value& v, const std::string& what) {
  SpmdInput in;
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    const std::string key(it->name.GetString(), it->name.GetStringLength());
    if (key == "per_rank") {
      if (!it->value.IsArray() || it->value.Empty()) bad(what + ".per_rank must be a non-empty list of tensors");
      size_t i = 0;
      for (const auto& t : it->value.GetArray()) {
        in.per_rank.push_back(tensor_from_json(t, what + ".per_rank[" + std::to_string(i++) + "]"));
      }
    } else if (key == "shard") {
      in.shard = tensor_from_json(it->value, what + ".shard");
    } else if (key == "dim") {
      if (!it->value.IsInt64()) bad(what + ".dim must be an integer");
      in.dim = it->value.GetInt64();
    } else {
      bad(what + ": unknown field \"" + key + "\" (expected per_rank, or shard and dim)");
    }
  }
  if (in.per_rank.empty() == !in.shard.defined()) bad(what + ": give either per_rank or shard");
  if (!in.per_rank.empty() && v.HasMember("dim")) bad(what + ": dim goes with shard, not per_rank");
  return in;
}
}  // namespace

bool apply_request_field(JobSpec& s, const std::string& key, const rapidjson::Value& v) {
  if (key == "inputs") {
    if (!v.IsObject()) bad("request.inputs must be an object");
    for (auto in = v.MemberBegin(); in != v.MemberEnd(); ++in) {
      std::string name(in->name.GetString(), in->name.GetStringLength());
      if (s.inputs.count(name) || (s.spmd && s.spmd->inputs.count(name))) bad("input '" + name + "' is given twice");
      if (in->value.IsObject() && (in->value.HasMember("per_rank") || in->value.HasMember("shard"))) {
        if (!s.spmd) s.spmd.emplace();
        s.spmd->inputs[name] = spmd_input_from_json(in->value, "inputs." + name);
      } else {
        s.inputs[name] = tensor_from_json(in->value, "inputs." + name);
      }
    }
  } else if (key == "store") {
    if (!v.IsObject()) bad("request.store must be an object of output -> tensor name");
    for (auto st = v.MemberBegin(); st != v.MemberEnd(); ++st) {
      if (!st->value.IsString()) bad("request.store values must be tensor names");
      s.store[std::string(st->name.GetString(), st->name.GetStringLength())] =
          std::string(st->value.GetString(), st->value.GetStringLength());
    }
  } else if (key == "return") {
    s.return_names = str_list(v, "request.return");
  } else if (key == "deadline_ms") {
    if (!v.IsInt64() || v.GetInt64() < 0) bad("request.deadline_ms must be a non-negative integer");
    s.deadline_ms = v.GetInt64();
  } else if (key == "priority") {
    if (!v.IsInt()) bad("request.priority must be an integer");
    s.priority = v.GetInt();
  } else if (key == "spmd_part") {
    // A coordinator's forward of some members' part (docs/api-notes.md).
    if (!v.IsObject() || !v.HasMember("members") || !v["members"].IsArray() || !v.HasMember("key") ||
        !v["key"].IsString() || v.MemberCount() != 2) {
      bad("request.spmd_part must be {\"members\": [indices], \"key\": string}");
    }
    if (!s.spmd) s.spmd.emplace();
    for (const auto& m : v["members"].GetArray()) {
      if (!m.IsUint()) bad("request.spmd_part.members must be group indices");
      s.spmd->part_members.push_back(m.GetUint());
    }
    if (s.spmd->part_members.empty()) bad("request.spmd_part.members is empty");
    s.spmd->part_key.assign(v["key"].GetString(), v["key"].GetStringLength());
  } else if (key == "ranks") {
    // SPMD (API.md 8): the whole world (R) or a subgroup ([r0, r1, ...]);
    // the engine checks them against the server's ranks.
    if (!s.spmd) s.spmd.emplace();
    if (v.IsArray()) {
      for (const auto& r : v.GetArray()) {
        if (!r.IsInt() || r.GetInt() < 0) bad("request.ranks must be a positive integer or a list of ranks (>= 0)");
        s.spmd->ranks.push_back(r.GetInt());
      }
      if (s.spmd->ranks.empty()) bad("request.ranks: an empty list of ranks");
    } else if (v.IsInt() && v.GetInt() >= 1) {
      s.spmd->count = v.GetInt();
    } else {
      bad("request.ranks must be a positive integer or a list of ranks");
    }
  } else {
    return false;
  }
  return true;
}

namespace {
void check_spmd_request(const JobSpec& s) {
  if (s.spmd && s.spmd->count == 0 && s.spmd->ranks.empty()) {
    bad("per_rank and shard inputs need \"ranks\" (API.md 8)");
  }
}

// A tensor's dtype and shape, for results whose data travel elsewhere.
void write_meta(JsonWriter& w, const Tensor& t) {
  w.StartObject();
  w.Key("dtype");
  w.String(std::string(dtype_name(t.dtype())));
  w.Key("shape");
  w.StartArray();
  for (int64_t d : t.shape()) w.Int64(d);
  w.EndArray();
  w.EndObject();
}
}  // namespace

[[noreturn]] void unknown_request_field(const std::string& key) {
  // A typo ("retrun") must not silently change what runs (API.md 4.1).
  bad("request: unknown field \"" + key + "\"");
}

std::string program_json_text(const rapidjson::Value& program) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  program.Accept(w);
  return std::string(sb.GetString(), sb.GetSize());
}

JobSpec job_spec_from_json(const rapidjson::Value& req, std::map<std::string, Tensor> file_inputs) {
  if (!req.IsObject()) bad("request must be a JSON object");
  JobSpec s;
  s.inputs = std::move(file_inputs);
  auto prog = req.FindMember("program");
  if (prog == req.MemberEnd()) bad("request: missing \"program\"");
  s.program = program_from_json(prog->value);
  s.program_json = program_json_text(prog->value);
  s.program_sha256 = sha256_hex(s.program_json);
  for (auto it = req.MemberBegin(); it != req.MemberEnd(); ++it) {
    std::string key(it->name.GetString(), it->name.GetStringLength());
    if (key != "program" && !apply_request_field(s, key, it->value)) unknown_request_field(key);
  }
  check_spmd_request(s);
  return s;
}

namespace {
// A job's outputs (API.md 4.1, 8): each a tensor (with "replicated": true
// in an SPMD job) or {"per_rank": [...]}; `tensors_inline` false writes
// dtype and shape only (the data travel in a safetensors body).
void write_outputs(JsonWriter& w, const JobResult& r, bool tensors_inline, bool use_b64) {
  w.Key("outputs");
  w.StartObject();
  for (size_t k = 0; k < r.outputs.size(); ++k) {
    const auto& [name, t] = r.outputs[k];
    w.Key(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
    if (r.spmd && !r.per_rank[k].empty()) {
      // API.md 8: a value that differs across ranks, in the group's order.
      w.StartObject();
      w.Key("per_rank");
      w.StartArray();
      for (const Tensor& each : r.per_rank[k]) {
        if (tensors_inline) {
          tensor_to_json(each, w, use_b64);
        } else {
          write_meta(w, each);
        }
      }
      w.EndArray();
      w.EndObject();
    } else if (tensors_inline) {
      w.StartObject();
      tensor_fields_to_json(t, w, use_b64);
      if (r.spmd) {
        w.Key("replicated");
        w.Bool(true);
      }
      w.EndObject();
    } else {
      write_meta(w, t);
    }
  }
  w.EndObject();
}
}  // namespace

namespace {
void write_job_result(rapidjson::StringBuffer& sb, const JobResult& r, bool tensors_inline, bool use_b64) {
  JsonWriter w(sb);
  w.StartObject();
  write_outputs(w, r, tensors_inline, use_b64);
  write_job(w, r);
  w.EndObject();
}
}  // namespace

std::string job_result_to_json(const JobResult& r, bool tensors_inline, bool use_b64) {
  rapidjson::StringBuffer sb;
  write_job_result(sb, r, tensors_inline, use_b64);
  return std::string(sb.GetString(), sb.GetSize());
}

std::vector<BodyView> job_result_to_json_body(const JobResult& r, bool use_b64) {
  DeferredB64 deferred;
  auto sb = std::make_shared<rapidjson::StringBuffer>();
  write_job_result(*sb, r, true, use_b64);
  return deferred.body(sb);
}

std::string job_accepted_to_json(const std::string& id) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("id");
  w.String(id);
  w.Key("state");
  w.String("queued");
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

std::string job_status_to_json(const Job& job, bool use_b64) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  const JobState st = job.observed_state();
  const bool ended = is_final(st);
  w.StartObject();
  w.Key("id");
  w.String(job.id());
  w.Key("state");
  w.String(std::string(job_state_name(st)));
  w.Key("tenant");
  w.String(job.tenant());
  w.Key("partition");
  w.String(job.partition());
  w.Key("queue_ms");
  w.Double(job.queue_ms());
  w.Key("run_ms");
  w.Double(job.run_ms());
  if (auto e = ended ? job.error() : std::nullopt) {
    w.Key("error");
    w.StartObject();
    w.Key("code");
    w.String(std::string(error_code_name(e->code())));
    w.Key("message");  // may echo the request: valid UTF-8 for the writer
    w.String(valid_utf8(e->message()));
    if (!e->node().empty()) {
      w.Key("node");
      w.String(valid_utf8(e->node()));
    }
    w.EndObject();
  }
  if (auto r = ended ? job.result() : nullptr) {
    write_outputs(w, *r, true, use_b64);
    // The stored result has no times (Engine::result_of adds them for a
    // waiting caller): the job's own.
    JobResult timed = *r;
    timed.outputs.clear();
    timed.per_rank.clear();
    timed.queue_ms = job.queue_ms();
    timed.run_ms = job.run_ms();
    write_job(w, timed);
  }
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

JobSpec job_spec_from_json_body(std::string& body) {
  BodyDocument bd;
  parse_json_object_insitu(body, bd.doc(), "body");
  return job_spec_from_json(bd.doc(), {});
}

JobSpec job_spec_from_json_text(std::string_view request, const char* what, std::map<std::string, Tensor> file_inputs) {
  rapidjson::Document d = parse_json_object(request, what);
  return job_spec_from_json(d, std::move(file_inputs));
}

}  // namespace tensord
