#include "api/mx_wire.h"

#include <set>
#include <string_view>

#include "api/json_parse.h"
#include "api/json_tensor.h"
#include "api/json_writer.h"

namespace tensord {
namespace {

using rapidjson::Value;

[[noreturn]] void fail(const std::string& what, const std::string& why) {
  throw Error(ErrorCode::kBadRequest, what + ": " + why);
}

// The description's fields; `extra` lists other keys the form allows
// (the JSON form's "elements", "scale"), whose values go to `found`.
std::shared_ptr<const MxMeta> parse_description(const Value& v, const std::string& what,
                                                std::map<std::string, const Value*>* extra) {
  if (!v.IsObject()) fail(what, "an MX description must be a JSON object");
  const Value* fmt = nullptr;
  const Value* bs = nullptr;
  const Value* axis = nullptr;
  const Value* shape = nullptr;
  for (const auto& m : v.GetObject()) {
    std::string_view key(m.name.GetString(), m.name.GetStringLength());
    const Value** slot = key == "mx"           ? &fmt
                         : key == "block_size" ? &bs
                         : key == "axis"       ? &axis
                         : key == "shape"      ? &shape
                                               : nullptr;
    if (!slot && extra) {
      auto it = extra->find(std::string(key));
      if (it != extra->end()) {
        if (it->second) fail(what, "\"" + std::string(key) + "\" given twice");
        it->second = &m.value;
        continue;
      }
    }
    if (!slot) {
      fail(what, "unknown key \"" + std::string(key.substr(0, 32)) +
                     "\" in an MX description (keys: mx, block_size, axis, shape" + (extra ? ", elements, scale" : "") +
                     ")");
    }
    if (*slot) fail(what, "\"" + std::string(key) + "\" given twice");
    *slot = &m.value;
  }
  if (!fmt || !bs || !axis || !shape)
    fail(what, "an MX description needs \"mx\", \"block_size\", \"axis\" and \"shape\"");
  if (!fmt->IsString()) fail(what, "\"mx\" must be a format name (" + mx_format_names() + ")");
  auto f = mx_format_from_name(std::string_view(fmt->GetString(), fmt->GetStringLength()));
  if (!f) {
    fail(what, "unknown MX format \"" + std::string(fmt->GetString(), std::min<size_t>(fmt->GetStringLength(), 32)) +
                   "\"; expected one of " + mx_format_names());
  }
  if (!bs->IsInt64()) fail(what, "\"block_size\" must be an integer");
  if (!axis->IsInt64()) fail(what, "\"axis\" must be an integer");
  if (!shape->IsArray() || shape->Size() > kMaxRank) {
    fail(what, "\"shape\" must be a list of at most " + std::to_string(kMaxRank) + " non-negative integers");
  }
  Shape s;
  for (const Value& d : shape->GetArray()) {
    if (!d.IsInt64() || d.GetInt64() < 0) fail(what, "\"shape\" must be a list of non-negative integers");
    s.push_back(d.GetInt64());
  }
  return make_mx_meta(*f, bs->GetInt64(), axis->GetInt64(), std::move(s), /*from_wire=*/true, what);
}

std::string quoted(std::string_view s) {
  return "\"" + std::string(s.substr(0, 64)) + (s.size() > 64 ? "...\"" : "\"");
}

}  // namespace

std::string mx_metadata_json(const MxMeta& m) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("mx");
  write_string(w, mx_format_name(m.format));
  w.Key("block_size");
  w.Int64(m.block_size);
  w.Key("axis");
  w.Int64(m.axis);
  w.Key("shape");
  w.StartArray();
  for (int64_t d : m.shape) w.Int64(d);
  w.EndArray();
  w.EndObject();
  return json_text(sb);
}

void join_mx_tensors(SafetensorsFile& f) {
  if (f.metadata.empty()) return;
  std::map<std::string_view, size_t> index;
  for (size_t i = 0; i < f.tensors.size(); ++i) index.emplace(f.tensors[i].first, i);
  std::map<size_t, Tensor> joined;  // elements' index -> the MX tensor
  std::set<size_t> dropped;         // the scales' indices
  std::vector<std::string> keys;
  for (const auto& [key, text] : f.metadata) {
    const bool names_tensor = index.count(key) || index.count(key + ".scale");
    if (!names_tensor) continue;
    rapidjson::Document doc;
    try {
      parse_json(text, doc, "metadata");
    } catch (const Error& e) {
      // Plain metadata, unless it was meant as an MX description.
      if (text.find("\"mx\"") == std::string::npos) continue;
      fail("safetensors: MX tensor " + quoted(key),
           "its __metadata__ description is not valid JSON (" + e.message() + ")");
    }
    if (!is_mx_json(doc)) continue;
    const std::string what = "safetensors: MX tensor " + quoted(key);
    auto m = parse_description(doc, what, nullptr);
    auto el = index.find(key);
    auto sc = index.find(key + ".scale");
    if (el == index.end()) fail(what, "the file has no entry " + quoted(key) + " (its packed elements, U8)");
    if (sc == index.end()) fail(what, "the file has no entry " + quoted(key + ".scale") + " (its scales, F8_E8M0)");
    const Tensor& elements = f.tensors[el->second].second;
    const Tensor& scale = f.tensors[sc->second].second;
    joined[el->second] = mx_from_parts(m, elements, scale, ErrorCode::kBadRequest, what);
    dropped.insert(sc->second);
    keys.push_back(key);
  }
  if (joined.empty()) return;
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(f.tensors.size() - dropped.size());
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    if (dropped.count(i)) continue;
    auto j = joined.find(i);
    out.emplace_back(std::move(f.tensors[i].first), j != joined.end() ? j->second : std::move(f.tensors[i].second));
  }
  f.tensors = std::move(out);
  for (const auto& k : keys) f.metadata.erase(k);
}

std::vector<std::pair<std::string, Tensor>> split_mx_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                                             std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    if (!t.is_mx()) {
      out.emplace_back(name, t);
      continue;
    }
    if (metadata.count(name)) {
      throw Error(ErrorCode::kBadRequest,
                  "safetensors: MX tensor " + quoted(name) + " needs the __metadata__ key of its name, which is taken");
    }
    metadata.emplace(name, mx_metadata_json(*t.meta().mx));
    out.emplace_back(name, mx_elements(t));
    out.emplace_back(name + ".scale", mx_scale(t));
  }
  return out;
}

bool is_mx_json(const Value& v) {
  return v.IsObject() && v.HasMember("mx");
}

Tensor mx_tensor_from_json(const Value& v, const std::string& what) {
  std::map<std::string, const Value*> parts{{"elements", nullptr}, {"scale", nullptr}, {"name", nullptr}};
  auto m = parse_description(v, what, &parts);
  if (!parts["elements"] || !parts["scale"]) fail(what, "an MX tensor needs \"elements\" and \"scale\"");
  Tensor elements = tensor_from_json(*parts["elements"], what + ".elements");
  Tensor scale = tensor_from_json(*parts["scale"], what + ".scale");
  return mx_from_parts(m, elements, scale, ErrorCode::kBadRequest, what);
}

}  // namespace tensord
