#include "api/kserve_json.h"

#include <array>
#include <charconv>
#include <cstring>
#include <set>

#include "api/json_document.h"
#include "api/json_parse.h"
#include "api/json_tensor.h"
#include "api/json_writer.h"
#include "ops/error.h"
#include "ops/shape.h"

namespace tensord {
namespace {

using rapidjson::Value;

[[noreturn]] void bad(const std::string& msg) {
  throw Error(ErrorCode::kBadRequest, msg);
}

constexpr std::array<std::pair<DType, std::string_view>, 10> kDatatypes = {{
    {DType::kBool, "BOOL"},
    {DType::kUInt8, "UINT8"},
    {DType::kInt8, "INT8"},
    {DType::kInt16, "INT16"},
    {DType::kInt32, "INT32"},
    {DType::kInt64, "INT64"},
    {DType::kFloat16, "FP16"},
    {DType::kBFloat16, "BF16"},
    {DType::kFloat32, "FP32"},
    {DType::kFloat64, "FP64"},
}};

std::string str(const Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

// User text echoed in a message: bounded.
std::string quoted(std::string_view s) {
  return "'" + std::string(s.substr(0, 128)) + (s.size() > 128 ? "...'" : "'");
}

std::string_view shown_datatype(DType t) {
  auto k = kserve_datatype(t);
  return k ? *k : dtype_name(t);
}

void write_info(JsonWriter& w, const KServeTensorInfo& t) {
  w.StartObject();
  w.Key("name");
  write_string(w, t.name);
  w.Key("datatype");
  write_string(w, shown_datatype(t.meta.dtype));
  w.Key("shape");
  w.StartArray();
  for (int64_t d : t.meta.shape) w.Int64(d);
  w.EndArray();
  w.EndObject();
}

std::string names_of(const std::vector<KServeTensorInfo>& v) {
  std::string out;
  for (const auto& t : v) out += (out.empty() ? "" : ", ") + t.name;
  return out.empty() ? "none" : out;
}

const KServeTensorInfo* find_info(const std::vector<KServeTensorInfo>& v, const std::string& name) {
  for (const auto& t : v) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Shape shape_from_json(const Value& v, const std::string& what) {
  if (!v.IsArray() || v.Size() > kMaxRank) bad(what + ": \"shape\" must be a list of at most 16 integers");
  Shape s;
  for (const Value& d : v.GetArray()) {
    if (!d.IsInt64() || d.GetInt64() < 0) bad(what + ": \"shape\" must be a list of non-negative integers");
    s.push_back(d.GetInt64());
  }
  return s;
}

// What a parameters object says; the extension's parameters are typed,
// others (Triton's sequence_id, priority, ...) are ignored as KServe allows.
struct Params {
  std::optional<int64_t> binary_data_size;
  std::optional<bool> binary_data;
  std::optional<bool> binary_data_output;
  std::optional<int64_t> timeout;
  std::optional<std::string> shm_region;
  std::optional<int64_t> shm_offset, shm_byte_size;
};

Params params_from_json(const Value& v, const std::string& what) {
  if (!v.IsObject()) bad(what + ": \"parameters\" must be an object");
  Params p;
  for (const auto& m : v.GetObject()) {
    const std::string key = str(m.name);
    const Value& x = m.value;
    if (key == "binary_data_size") {
      if (!x.IsInt64() || x.GetInt64() < 0) bad(what + ": binary_data_size must be a non-negative integer");
      p.binary_data_size = x.GetInt64();
    } else if (key == "binary_data" || key == "binary_data_output") {
      if (!x.IsBool()) bad(what + ": " + key + " must be true or false");
      (key == "binary_data" ? p.binary_data : p.binary_data_output) = x.GetBool();
    } else if (key == "timeout") {
      if (!x.IsInt64() || x.GetInt64() < 0) bad(what + ": timeout must be a non-negative integer (microseconds)");
      p.timeout = x.GetInt64();
    } else if (key == "shared_memory_region") {
      if (!x.IsString() || x.GetStringLength() == 0) bad(what + ": shared_memory_region must be a region's name");
      p.shm_region = str(x);
    } else if (key == "shared_memory_offset" || key == "shared_memory_byte_size") {
      if (!x.IsInt64() || x.GetInt64() < 0) bad(what + ": " + key + " must be a non-negative integer");
      (key == "shared_memory_offset" ? p.shm_offset : p.shm_byte_size) = x.GetInt64();
    } else if (key.starts_with("shared_memory_") || key == "classification") {
      bad(what + ": parameter " + key + " is not supported (extensions: binary_tensor_data, system_shared_memory)");
    }
  }
  return p;
}

// A tensor's place in a shared memory region, from its parameters; nullopt
// when it names none. byte_size is required.
std::optional<KServeShmRef> shm_ref(const Params& p, const std::string& what) {
  if (!p.shm_region) {
    if (p.shm_offset || p.shm_byte_size) bad(what + ": shared_memory_offset/byte_size without shared_memory_region");
    return std::nullopt;
  }
  if (!p.shm_byte_size) bad(what + ": shared_memory_region without shared_memory_byte_size");
  return KServeShmRef{*p.shm_region, static_cast<uint64_t>(p.shm_offset.value_or(0)),
                      static_cast<uint64_t>(*p.shm_byte_size)};
}

struct BinaryInput {
  std::string name;
  size_t bytes;
};

}  // namespace

void check_kserve_bool_bytes(const Tensor& t, const std::string& name) {
  const auto* p = static_cast<const unsigned char*>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i) {
    if (p[i] > 1)
      bad("input " + quoted(name) + ": BOOL element " + std::to_string(i) + " is byte " + std::to_string(p[i]) +
          ", not 0 or 1");
  }
}

std::optional<std::string_view> kserve_datatype(DType t) {
  for (const auto& [dt, name] : kDatatypes) {
    if (dt == t) return name;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_kserve(std::string_view datatype) {
  for (const auto& [dt, name] : kDatatypes) {
    if (name == datatype) return dt;
  }
  return std::nullopt;
}

void check_kserve_dtypes(const KServeModel& m) {
  for (const auto* list : {&m.inputs, &m.outputs}) {
    for (const auto& t : *list) {
      if (!kserve_datatype(t.meta.dtype)) {
        bad("model " + quoted(m.name) + ": " + (list == &m.inputs ? "input " : "output ") + quoted(t.name) +
            " has dtype " + std::string(dtype_name(t.meta.dtype)) +
            ", which KServe v2 has no datatype for; replay it through /v1/graphs/{id}/replay");
      }
    }
  }
}

std::string kserve_server_metadata_json(const std::string& version, const std::vector<std::string_view>& extensions) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("name");
  w.String("tensord");
  w.Key("version");
  write_string(w, version);
  w.Key("extensions");
  w.StartArray();
  for (std::string_view e : extensions) write_string(w, e);
  w.EndArray();
  w.EndObject();
  return json_text(sb);
}

std::string kserve_model_metadata_json(const KServeModel& m) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("name");
  write_string(w, m.name);
  w.Key("versions");
  w.StartArray();
  w.String("1");
  w.EndArray();
  w.Key("platform");
  w.String("tensord");
  w.Key("inputs");
  w.StartArray();
  for (const auto& t : m.inputs) write_info(w, t);
  w.EndArray();
  w.Key("outputs");
  w.StartArray();
  for (const auto& t : m.outputs) write_info(w, t);
  w.EndArray();
  w.EndObject();
  return json_text(sb);
}

std::string kserve_model_ready_json(const std::string& name) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("name");
  write_string(w, name);
  w.Key("ready");
  w.Bool(true);
  w.EndObject();
  return json_text(sb);
}

std::optional<size_t> parse_inference_header_length(const std::string& value) {
  if (value.empty()) return std::nullopt;
  size_t n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size()) {
    bad("Inference-Header-Content-Length must be a non-negative integer, got " + quoted(value));
  }
  return n;
}

KServeInferRequest kserve_infer_from_body(std::string& body, std::optional<size_t> header_length,
                                          const KServeModel& m) {
  check_kserve_dtypes(m);
  if (header_length && *header_length > body.size()) {
    bad("Inference-Header-Content-Length is " + std::to_string(*header_length) + " but the body has only " +
        std::to_string(body.size()) + " bytes");
  }
  const size_t json_len = header_length ? *header_length : body.size();
  BodyDocument bd;
  rapidjson::Document& d = bd.doc();
  if (json_len == body.size()) {
    parse_json_insitu(body, d, "request");  // no binary part: the body is unused after this
  } else {
    parse_json(std::string_view(body).substr(0, json_len), d, "request");
  }
  if (!d.IsObject()) bad("the request must be a JSON object");

  KServeInferRequest r;
  const Value* inputs_v = nullptr;
  const Value* outputs_v = nullptr;
  Params req_params;
  for (const auto& mem : d.GetObject()) {
    const std::string key = str(mem.name);
    if (key == "id") {
      if (!mem.value.IsString()) bad("\"id\" must be a string");
      r.id = str(mem.value);
    } else if (key == "inputs") {
      inputs_v = &mem.value;
    } else if (key == "outputs") {
      outputs_v = &mem.value;
    } else if (key == "parameters") {
      req_params = params_from_json(mem.value, "request");
    } else {
      bad("unknown field " + quoted(key) + " (a request has id, parameters, inputs, outputs)");
    }
  }
  r.timeout_us = req_params.timeout.value_or(0);
  const bool binary_default = req_params.binary_data_output.value_or(false);

  if (!inputs_v || !inputs_v->IsArray()) bad("\"inputs\" must be a list of {name, shape, datatype, data}");
  std::vector<BinaryInput> binary;
  for (const Value& in : inputs_v->GetArray()) {
    if (!in.IsObject()) bad("each of \"inputs\" must be an object {name, shape, datatype, data}");
    const Value *name_v = nullptr, *shape_v = nullptr, *dt_v = nullptr, *data_v = nullptr;
    Params p;
    for (const auto& mem : in.GetObject()) {
      const std::string key = str(mem.name);
      if (key == "name") {
        name_v = &mem.value;
      } else if (key == "shape") {
        shape_v = &mem.value;
      } else if (key == "datatype") {
        dt_v = &mem.value;
      } else if (key == "data") {
        data_v = &mem.value;
      } else if (key == "parameters") {
        p = params_from_json(mem.value, "an input");
      } else {
        bad("unknown input field " + quoted(key) + " (an input has name, shape, datatype, parameters, data)");
      }
    }
    if (!name_v || !name_v->IsString()) bad("an input without a string \"name\"");
    const std::string name = str(*name_v);
    const std::string what = "input " + quoted(name);
    const KServeTensorInfo* info = find_info(m.inputs, name);
    if (!info) bad("unknown " + what + "; the model's inputs are " + names_of(m.inputs));
    if (r.inputs.contains(name)) bad(what + " given twice");
    if (!dt_v || !dt_v->IsString()) bad(what + ": \"datatype\" must be a string such as FP32");
    const std::string_view want_dt = *kserve_datatype(info->meta.dtype);
    if (str(*dt_v) != want_dt) {
      bad(what + ": datatype " + quoted(str(*dt_v)) + ", the model takes " + std::string(want_dt));
    }
    if (!shape_v) bad(what + ": missing \"shape\"");
    Shape shape = shape_from_json(*shape_v, what);
    if (shape != info->meta.shape) {
      bad(what + ": shape " + shape_str(shape) + ", the model takes " + shape_str(info->meta.shape));
    }
    if (auto ref = shm_ref(p, what)) {
      if (data_v || p.binary_data_size) {
        bad(what + ": give one of \"data\", binary_data_size or shared_memory_region");
      }
      if (ref->byte_size != info->meta.nbytes()) {
        bad(what + ": shared_memory_byte_size " + std::to_string(ref->byte_size) + " disagrees with " +
            std::string(want_dt) + shape_str(shape) + " (" + std::to_string(info->meta.nbytes()) + " bytes)");
      }
      r.shm_inputs.push_back({name, std::move(*ref)});
      r.inputs.emplace(name, Tensor::empty_host(info->meta.dtype, info->meta.shape));  // the caller reads into it
    } else if (p.binary_data_size) {
      if (data_v) bad(what + ": give either \"data\" or parameters.binary_data_size, not both");
      if (static_cast<size_t>(*p.binary_data_size) != info->meta.nbytes()) {
        bad(what + ": binary_data_size " + std::to_string(*p.binary_data_size) + " disagrees with " +
            std::string(want_dt) + shape_str(shape) + " (" + std::to_string(info->meta.nbytes()) + " bytes)");
      }
      binary.push_back({name, info->meta.nbytes()});
      r.inputs.emplace(name, Tensor{});  // filled from the binary part below
    } else {
      if (!data_v) bad(what + ": missing \"data\" (or parameters.binary_data_size)");
      r.inputs.emplace(name, tensor_from_json_data(*data_v, info->meta.dtype, info->meta.shape, what));
    }
  }
  for (const auto& t : m.inputs) {
    if (!r.inputs.contains(t.name)) bad("missing input " + quoted(t.name));
  }

  size_t pos = json_len;
  for (const auto& b : binary) {
    if (body.size() - pos < b.bytes) {
      bad("the body ends " + std::to_string(body.size() - pos) + " bytes into input " + quoted(b.name) + "'s " +
          std::to_string(b.bytes) + " bytes of binary data");
    }
    const TensorMeta& meta = find_info(m.inputs, b.name)->meta;
    Tensor t = Tensor::empty_host(meta.dtype, meta.shape);
    if (b.bytes) std::memcpy(t.data(), body.data() + pos, b.bytes);
    if (meta.dtype == DType::kBool) check_kserve_bool_bytes(t, b.name);
    r.inputs[b.name] = std::move(t);
    pos += b.bytes;
  }
  if (pos != body.size()) {
    bad("the body has " + std::to_string(body.size() - pos) + " bytes after " +
        (binary.empty() ? std::string("the JSON request") : "the last binary input") +
        (header_length ? " (Inference-Header-Content-Length " + std::to_string(*header_length) + ")" : ""));
  }

  if (outputs_v) {
    if (!outputs_v->IsArray()) bad("\"outputs\" must be a list of {name, parameters?}");
    r.outputs_named = true;
    std::set<std::string> seen;
    for (const Value& out : outputs_v->GetArray()) {
      if (!out.IsObject()) bad("each of \"outputs\" must be an object {name, parameters?}");
      std::optional<std::string> name;
      Params p;
      for (const auto& mem : out.GetObject()) {
        const std::string key = str(mem.name);
        if (key == "name" && mem.value.IsString()) {
          name = str(mem.value);
        } else if (key == "parameters") {
          p = params_from_json(mem.value, "an output");
        } else {
          bad("output field " + quoted(key) + ": an output has a string name and parameters");
        }
      }
      if (!name) bad("an output without a string \"name\"");
      if (!find_info(m.outputs, *name)) {
        bad("unknown output " + quoted(*name) + "; the model's outputs are " + names_of(m.outputs));
      }
      if (!seen.insert(*name).second) bad("output " + quoted(*name) + " requested twice");
      auto ref = shm_ref(p, "output " + quoted(*name));
      if (ref && p.binary_data.value_or(false)) {
        bad("output " + quoted(*name) + ": binary_data and shared_memory_region both given");
      }
      r.outputs.push_back({*name, !ref && p.binary_data.value_or(binary_default), std::move(ref)});
    }
  } else {
    for (const auto& t : m.outputs) r.outputs.push_back({t.name, binary_default, std::nullopt});
  }
  return r;
}

KServeInferResponse kserve_infer_response(const std::string& model, const std::optional<std::string>& id,
                                          const std::vector<std::pair<KServeOutputRequest, Tensor>>& outputs) {
  KServeInferResponse resp;
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("model_name");
  write_string(w, model);
  w.Key("model_version");
  w.String("1");
  if (id) {
    w.Key("id");
    write_string(w, *id);
  }
  w.Key("outputs");
  w.StartArray();
  for (const auto& [req, t] : outputs) {
    w.StartObject();
    w.Key("name");
    write_string(w, req.name);
    w.Key("datatype");
    write_string(w, shown_datatype(t.dtype()));
    w.Key("shape");
    w.StartArray();
    for (int64_t d : t.shape()) w.Int64(d);
    w.EndArray();
    if (req.shm) {
      // Written into the region by the caller; the answer says where.
      w.Key("parameters");
      w.StartObject();
      w.Key("shared_memory_region");
      write_string(w, req.shm->region);
      w.Key("shared_memory_byte_size");
      w.Uint64(t.nbytes());
      if (req.shm->offset) {
        w.Key("shared_memory_offset");
        w.Uint64(req.shm->offset);
      }
      w.EndObject();
    } else if (req.binary) {
      w.Key("parameters");
      w.StartObject();
      w.Key("binary_data_size");
      w.Uint64(t.nbytes());
      w.EndObject();
      resp.binary.push_back(t);
    } else {
      w.Key("data");
      tensor_data_to_json(t, w);
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  resp.header = json_text(sb);
  return resp;
}

}  // namespace tensord
