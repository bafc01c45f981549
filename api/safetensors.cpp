#include "api/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string_view>
#include <unordered_set>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "api/json_parse.h"
#include "api/mx_wire.h"
#include "ops/error.h"

namespace tensord {
namespace {

using rapidjson::Value;

static_assert(std::endian::native == std::endian::little, "safetensors bytes are little-endian");

[[noreturn]] void fail(const std::string& reason) {
  throw Error(ErrorCode::kBadRequest, "safetensors: " + reason);
}

std::string quoted(std::string_view s) {
  return "\"" + std::string(s.substr(0, 64)) + (s.size() > 64 ? "...\"" : "\"");
}

struct Entry {
  std::string_view name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

Entry parse_entry(std::string_view name, const Value& v) {
  const std::string who = "tensor " + quoted(name);
  if (!v.IsObject()) fail(who + " must be an object {\"dtype\", \"shape\", \"data_offsets\"}");
  const Value* dtype_v = nullptr;
  const Value* shape_v = nullptr;
  const Value* offsets_v = nullptr;
  for (const auto& m : v.GetObject()) {
    std::string_view key(m.name.GetString(), m.name.GetStringLength());
    const Value** slot = key == "dtype"          ? &dtype_v
                         : key == "shape"        ? &shape_v
                         : key == "data_offsets" ? &offsets_v
                                                 : nullptr;
    if (!slot) fail(who + ": unknown key " + quoted(key));
    if (*slot) fail(who + ": key " + quoted(key) + " given twice");
    *slot = &m.value;
  }
  if (!dtype_v || !shape_v || !offsets_v) fail(who + " needs \"dtype\", \"shape\" and \"data_offsets\"");

  Entry e{name, DType::kBool, {}, 0, 0};
  if (!dtype_v->IsString()) fail(who + ": \"dtype\" must be a string");
  std::string_view tag(dtype_v->GetString(), dtype_v->GetStringLength());
  auto dt = dtype_from_safetensors_tag(tag);
  if (!dt) {
    fail(who + ": unknown dtype " + quoted(tag) +
         " (known: BOOL U8 I8 I16 I32 I64 F16 BF16 F32 F64 F8_E4M3 F8_E5M2 F8_E8M0 C64 C128)");
  }
  e.dtype = *dt;

  if (!shape_v->IsArray()) fail(who + ": \"shape\" must be a list of non-negative integers");
  if (shape_v->Size() > kMaxRank) {
    fail(who + ": shape has rank " + std::to_string(shape_v->Size()) + ", at most " + std::to_string(kMaxRank) +
         " is supported");
  }
  for (const Value& d : shape_v->GetArray()) {
    if (!d.IsInt64() || d.GetInt64() < 0) fail(who + ": \"shape\" must be a list of non-negative integers");
    e.shape.push_back(d.GetInt64());
  }
  try {
    shape_numel(e.shape);
  } catch (const Error& err) {
    fail(who + ": " + err.message());
  }

  if (!offsets_v->IsArray() || offsets_v->Size() != 2 || !(*offsets_v)[0].IsUint64() || !(*offsets_v)[1].IsUint64()) {
    fail(who + ": \"data_offsets\" must be [begin, end] with non-negative integers");
  }
  e.begin = (*offsets_v)[0].GetUint64();
  e.end = (*offsets_v)[1].GetUint64();
  return e;
}

std::string offsets_str(const Entry& e) {
  return "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
}

}  // namespace

SafetensorsFile parse_safetensors(const std::shared_ptr<const std::string>& body) {
  TENSORD_ASSERT(body != nullptr);
  const std::string& b = *body;
  if (b.size() < 8) fail("body of " + std::to_string(b.size()) + " bytes is shorter than the 8-byte header length");
  uint64_t n = 0;
  std::memcpy(&n, b.data(), 8);
  if (n > kSafetensorsMaxHeaderBytes) {
    fail("header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kSafetensorsMaxHeaderBytes) +
         " bytes");
  }
  if (n > b.size() - 8) {
    fail("header length " + std::to_string(n) + " runs past the end of the " + std::to_string(b.size()) + "-byte body");
  }
  const char* data_start = b.data() + 8 + n;
  const uint64_t data_size = b.size() - 8 - n;

  rapidjson::Document doc;
  parse_json(std::string_view(b.data() + 8, n), doc, "safetensors header");
  if (!doc.IsObject()) fail("header must be a JSON object");

  SafetensorsFile out;
  std::vector<Entry> entries;
  std::unordered_set<std::string_view> seen;
  for (const auto& m : doc.GetObject()) {
    std::string_view name(m.name.GetString(), m.name.GetStringLength());
    if (!seen.insert(name).second) fail("duplicate key " + quoted(name) + " in the header");
    if (name == "__metadata__") {
      if (!m.value.IsObject()) fail("\"__metadata__\" must be an object of strings");
      for (const auto& kv : m.value.GetObject()) {
        std::string key(kv.name.GetString(), kv.name.GetStringLength());
        if (!kv.value.IsString()) fail("\"__metadata__\" value of " + quoted(key) + " must be a string");
        if (out.metadata.count(key)) fail("duplicate \"__metadata__\" key " + quoted(key));
        out.metadata.emplace(std::move(key), std::string(kv.value.GetString(), kv.value.GetStringLength()));
      }
      continue;
    }
    Entry e = parse_entry(name, m.value);
    const std::string who = "tensor " + quoted(name);
    if (e.end < e.begin) fail(who + ": data_offsets " + offsets_str(e) + " end before they begin");
    if (e.end > data_size) {
      fail(who + ": data_offsets " + offsets_str(e) + " run past the " + std::to_string(data_size) +
           "-byte data section");
    }
    uint64_t want = static_cast<uint64_t>(shape_numel(e.shape)) * dtype_size(e.dtype);
    if (e.end - e.begin != want) {
      fail(who + ": data_offsets " + offsets_str(e) + " span " + std::to_string(e.end - e.begin) + " bytes, " +
           std::string(dtype_safetensors_tag(e.dtype)) + shape_str(e.shape) + " needs " + std::to_string(want));
    }
    entries.push_back(std::move(e));
  }

  // No two non-empty byte ranges may overlap.
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries) {
    if (e.end > e.begin) by_offset.push_back(&e);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* c) { return a->begin < c->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end) {
      fail("tensors " + quoted(by_offset[i - 1]->name) + " " + offsets_str(*by_offset[i - 1]) + " and " +
           quoted(by_offset[i]->name) + " " + offsets_str(*by_offset[i]) + " overlap");
    }
  }

  out.tensors.reserve(entries.size());
  for (Entry& e : entries) {
    const char* p = data_start + e.begin;
    const size_t nbytes = e.end - e.begin;
    if (e.dtype == DType::kBool) {
      const auto* u = reinterpret_cast<const unsigned char*>(p);
      for (size_t i = 0; i < nbytes; ++i) {
        if (u[i] > 1) {
          fail("tensor " + quoted(e.name) + ": bool byte " + std::to_string(i) + " is " + std::to_string(u[i]) +
               ", not 0 or 1");
        }
      }
    }
    Tensor t;
    if (nbytes > 0 && reinterpret_cast<uintptr_t>(p) % dtype_alignment(e.dtype) == 0) {
      // The storage never writes through this pointer on its own; ops write
      // only to outputs they allocate.
      auto storage = Storage::wrap(const_cast<char*>(p), nbytes, body, body->size());
      t = Tensor(TensorMeta{e.dtype, std::move(e.shape)}, std::move(storage));
    } else {
      t = Tensor::empty_host(e.dtype, std::move(e.shape));
      if (nbytes > 0) std::memcpy(t.data(), p, nbytes);
    }
    out.tensors.emplace_back(std::string(e.name), std::move(t));
  }
  join_mx_tensors(out);
  return out;
}

SafetensorsParts encode_safetensors_parts(const std::vector<std::pair<std::string, Tensor>>& given,
                                          const std::map<std::string, std::string>& given_metadata) {
  // MX tensors travel as two entries and a description (api/mx_wire.h).
  std::map<std::string, std::string> metadata = given_metadata;
  const std::vector<std::pair<std::string, Tensor>> tensors = split_mx_tensors(given, metadata);
  std::unordered_set<std::string_view> names;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") fail("a tensor may not be named \"__metadata__\"");
    if (!names.insert(name).second) fail("duplicate tensor name " + quoted(name));
    TENSORD_ASSERT(t.defined() && t.device().type == DeviceType::kCPU);
  }

  // Data layout: by element size, largest first, stable.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t c) {
    return dtype_size(tensors[a].second.dtype()) > dtype_size(tensors[c].second.dtype());
  });
  std::vector<uint64_t> begin(tensors.size());
  uint64_t total = 0;
  for (size_t i : order) {
    begin[i] = total;
    total += tensors[i].second.nbytes();
  }

  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  if (!metadata.empty()) {
    w.Key("__metadata__");
    w.StartObject();
    for (const auto& [k, v] : metadata) {
      w.Key(k.data(), static_cast<rapidjson::SizeType>(k.size()));
      w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
    }
    w.EndObject();
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    w.Key(name.data(), static_cast<rapidjson::SizeType>(name.size()));
    w.StartObject();
    w.Key("dtype");
    std::string_view tag = dtype_safetensors_tag(t.dtype());
    w.String(tag.data(), static_cast<rapidjson::SizeType>(tag.size()));
    w.Key("shape");
    w.StartArray();
    for (int64_t d : t.shape()) w.Int64(d);
    w.EndArray();
    w.Key("data_offsets");
    w.StartArray();
    w.Uint64(begin[i]);
    w.Uint64(begin[i] + t.nbytes());
    w.EndArray();
    w.EndObject();
  }
  w.EndObject();

  std::string json(sb.GetString(), sb.GetSize());
  json.append((8 - json.size() % 8) % 8, ' ');
  SafetensorsParts parts;
  const uint64_t n = json.size();
  parts.header.resize(8);
  std::memcpy(parts.header.data(), &n, 8);
  parts.header += json;
  // In layout order (by element size), not header order; the data section
  // has no gaps, so the tensors follow each other as they are.
  for (size_t i : order) parts.data.push_back(tensors[i].second);
  return parts;
}

std::string encode_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  SafetensorsParts parts = encode_safetensors_parts(tensors, metadata);
  size_t total = parts.header.size();
  for (const Tensor& t : parts.data) total += t.nbytes();
  // Appended, not resize()d then copied: a resize zero-fills every byte
  // first (half of a large GET's time went to that memset).
  std::string out;
  out.reserve(total);
  out.append(parts.header);
  for (const Tensor& t : parts.data) {
    if (t.nbytes()) out.append(static_cast<const char*>(t.data()), t.nbytes());
  }
  return out;
}

}  // namespace tensord
