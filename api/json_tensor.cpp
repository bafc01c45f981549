#include "api/json_tensor.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <complex>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>

#include "api/base64.h"
#include "api/json_numbers.h"
#include "api/json_parse.h"
#include "api/json_scan.h"
#include "api/json_writer.h"
#include "api/mx_wire.h"
#include "ops/cpu/huge_pages.h"
#include "ops/dispatch.h"
#include "ops/error.h"
#include "ops/kernels/scalar_traits.h"

namespace tensord {
namespace {

using rapidjson::Value;

// Array levels a tensor's data may have: one per dimension plus [re, im].
constexpr int kMaxDataDepth = static_cast<int>(kMaxRank) + 1;

[[noreturn]] void fail(const std::string& what, const std::string& reason) {
  throw Error(ErrorCode::kBadRequest, what + ": " + reason);
}

// A short description of a JSON value for error messages.
std::string describe(const Value& v) {
  if (v.IsNull()) return "null";
  if (v.IsBool()) return v.GetBool() ? "true" : "false";
  if (v.IsObject()) return "an object";
  if (v.IsArray()) return "a list";
  if (v.IsString()) {
    std::string s(v.GetString(), std::min<size_t>(v.GetStringLength(), 32));
    return "the string \"" + s + (v.GetStringLength() > 32 ? "...\"" : "\"");
  }
  if (v.IsInt64()) return std::to_string(v.GetInt64());
  if (v.IsUint64()) return std::to_string(v.GetUint64());
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v.GetDouble());
  return std::string(buf, r.ptr);
}

std::string element(int64_t idx) {
  return "element " + std::to_string(idx) + " (row-major)";
}

// "nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", any case.
bool parse_nonfinite(const Value& v, double* out) {
  if (!v.IsString() || v.GetStringLength() > 9) return false;
  std::string s(v.GetString(), v.GetStringLength());
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (s == "nan") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  double sign = 1.0;
  if (s[0] == '+' || s[0] == '-') {
    sign = s[0] == '-' ? -1.0 : 1.0;
    s.erase(0, 1);
  }
  if (s == "inf" || s == "infinity") {
    *out = sign * std::numeric_limits<double>::infinity();
    return true;
  }
  return false;
}

double leaf_real(const Value& v, const std::string& what, int64_t idx) {
  if (v.IsNumber()) return v.GetDouble();
  if (v.IsBool()) return v.GetBool() ? 1.0 : 0.0;
  double d;
  if (parse_nonfinite(v, &d)) return d;
  fail(what, element(idx) + ": expected a number or \"nan\"/\"inf\"/\"-inf\", got " + describe(v));
}

template <class I>
constexpr DType int_dtype() {
  return std::is_same_v<I, uint8_t>   ? DType::kUInt8
         : std::is_same_v<I, int8_t>  ? DType::kInt8
         : std::is_same_v<I, int16_t> ? DType::kInt16
         : std::is_same_v<I, int32_t> ? DType::kInt32
                                      : DType::kInt64;
}

template <class I>
I leaf_int(const Value& v, const std::string& what, int64_t idx) {
  constexpr auto kMin = std::numeric_limits<I>::min();
  constexpr auto kMax = std::numeric_limits<I>::max();
  auto out_of_range = [&]() {
    fail(what, element(idx) + ": " + describe(v) + " is out of range for " + std::string(dtype_name(int_dtype<I>())) +
                   " [" + std::to_string(kMin) + ", " + std::to_string(kMax) + "]");
  };
  if (v.IsBool()) return static_cast<I>(v.GetBool());
  if (v.IsInt64()) {
    int64_t x = v.GetInt64();
    if (x < static_cast<int64_t>(kMin) || x > static_cast<int64_t>(kMax)) out_of_range();
    return static_cast<I>(x);
  }
  if (v.IsUint64()) out_of_range();  // above INT64_MAX
  if (v.IsDouble()) {
    double d = v.GetDouble();
    if (!std::isfinite(d) || std::trunc(d) != d) {
      fail(what, element(idx) + ": expected an integer, got " + describe(v));
    }
    // Bounds are exact powers of two (or 0) in double.
    if (d < static_cast<double>(kMin) || d >= static_cast<double>(kMax) + 1.0) out_of_range();
    return static_cast<I>(d);
  }
  fail(what, element(idx) + ": expected an integer, got " + describe(v));
}

bool leaf_bool(const Value& v, const std::string& what, int64_t idx) {
  if (v.IsBool()) return v.GetBool();
  if (v.IsNumber()) {
    double d = v.GetDouble();
    if (d == 0.0 || d == 1.0) return d == 1.0;
  }
  fail(what, element(idx) + ": expected true, false, 0 or 1, got " + describe(v));
}

bool is_scalar_json(const Value& v) {
  return !v.IsArray() && !v.IsObject();
}
bool is_pair(const Value& v) {
  return v.IsArray() && v.Size() == 2 && is_scalar_json(v[0]) && is_scalar_json(v[1]);
}

// Parses one element into out[idx]; T is the storage type.
template <class T>
void parse_leaf(const Value& v, T* out, int64_t idx, const std::string& what) {
  T x;
  if constexpr (std::is_same_v<T, bool>) {
    x = leaf_bool(v, what, idx);
  } else if constexpr (std::is_integral_v<T>) {
    x = leaf_int<T>(v, what, idx);
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    x = static_cast<T>(leaf_real(v, what, idx));
  } else if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
    using C = typename T::value_type;
    if (!is_pair(v)) fail(what, element(idx) + ": a complex element is [re, im], got " + describe(v));
    x = T(static_cast<C>(leaf_real(v[0], what, idx)), static_cast<C>(leaf_real(v[1], what, idx)));
  } else {
    // Narrow floats: double -> float -> RNE, as every cast in ops/convert.cpp.
    x = kernels::ScalarTraits<T>::store(static_cast<float>(leaf_real(v, what, idx)));
  }
  std::memcpy(out + idx, &x, sizeof(T));
}

// Array levels above the elements, following first elements (a complex
// element's [re, im] is not a level).
int data_depth(const Value& data, bool complex, const std::string& what) {
  int levels = 0;
  const Value* p = &data;
  while (p->IsArray() && !(complex && is_pair(*p))) {
    if (++levels > kMaxDataDepth) fail(what, "data is nested deeper than the 16 dimensions a tensor may have");
    if (p->Empty()) break;
    p = &(*p)[0];
  }
  return levels;
}

Shape infer_shape(const Value& data, int depth) {
  Shape s;
  const Value* p = &data;
  for (int i = 0; i < depth; ++i) {
    s.push_back(static_cast<int64_t>(p->Size()));
    if (p->Empty()) {
      // [] at this level: the deeper dims are unknown, hence 0-sized as well.
      while (static_cast<int>(s.size()) < depth) s.push_back(0);
      break;
    }
    p = &(*p)[0];
  }
  return s;
}

Shape parse_shape(const Value& v, const std::string& what) {
  if (!v.IsArray()) fail(what, "shape must be a list of non-negative integers, got " + describe(v));
  if (v.Size() > kMaxRank) {
    fail(what,
         "shape has rank " + std::to_string(v.Size()) + ", at most " + std::to_string(kMaxRank) + " is supported");
  }
  Shape s;
  for (const Value& d : v.GetArray()) {
    if (!d.IsInt64() || d.GetInt64() < 0) {
      fail(what, "shape must be a list of non-negative integers, got " + describe(d) + " in it");
    }
    s.push_back(d.GetInt64());
  }
  return s;
}

int64_t checked_numel(const Shape& s, const std::string& what) {
  try {
    return shape_numel(s);
  } catch (const Error& e) {
    fail(what, e.message());
  }
}

// How `data` lays out its elements against the shape.
enum class Layout { kNested, kFlat };

// Calls f(element, flat_index) for every element, checking the structure.
template <class F>
void walk_nested(const Value& v, const Shape& shape, size_t dim, int64_t& idx, const std::string& what, F& f) {
  if (dim == shape.size()) {
    f(v, idx++);
    return;
  }
  if (!v.IsArray() || static_cast<int64_t>(v.Size()) != shape[dim]) {
    fail(what, "data does not match shape " + shape_str(shape) + ": at dimension " + std::to_string(dim) +
                   " expected a list of " + std::to_string(shape[dim]) + ", got " +
                   (v.IsArray() ? "a list of " + std::to_string(v.Size()) : describe(v)));
  }
  for (const Value& e : v.GetArray()) walk_nested(e, shape, dim + 1, idx, what, f);
}

template <class F>
void walk(const Value& data, Layout layout, const Shape& shape, const std::string& what, F&& f) {
  if (layout == Layout::kNested) {
    int64_t idx = 0;
    walk_nested(data, shape, 0, idx, what, f);
  } else {
    int64_t idx = 0;
    for (const Value& e : data.GetArray()) f(e, idx++);
  }
}

DType infer_dtype(const Value& data, Layout layout, const Shape& shape, const std::string& what) {
  bool all_bool = true, all_int = true;
  walk(data, layout, shape, what, [&](const Value& e, int64_t) {
    if (e.IsBool()) return;
    all_bool = false;
    if (!(e.IsInt64() || e.IsUint64())) all_int = false;
  });
  bool empty = shape_numel(shape) == 0;
  if (all_bool && !empty) return DType::kBool;
  if (all_int && !empty) return DType::kInt64;
  return DType::kFloat32;
}

Tensor scalar_from_json(const Value& v, const std::string& what) {
  DType dt = v.IsBool() ? DType::kBool : (v.IsInt64() || v.IsUint64()) ? DType::kInt64 : DType::kFloat32;
  Tensor t = Tensor::empty_host(dt, {});
  dispatch_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    parse_leaf<T>(v, t.data_ptr<T>(), 0, what);
  });
  return t;
}

// Where a large b64 payload may be decoded in place: the request body the
// document was parsed from in situ, and how to share it once decoded.
struct InPlaceBody {
  std::string* body = nullptr;
  const BodyShare* share = nullptr;
  // The top-level "b64" value's text in `body` when it was cut out of the
  // document before parsing (the document then holds "" in its place).
  std::string_view cut;
  // The top-level "b64" value already decoded as the body arrived
  // (HttpRequest::decoded_b64; the document holds "" in its place), and
  // how to share its string.
  DecodedB64* decoded = nullptr;
  const BodyShare* share_decoded = nullptr;
};

// Payloads at least this large are decoded into their own body's memory.
constexpr size_t kInPlaceB64Bytes = size_t{1} << 20;

// The offset in `body` where `want` decoded bytes of the text at `text_at`
// may land: at or before the text (decoding runs forward and writes 3 bytes
// per 4 read, so it never overtakes its input), 64-byte aligned when
// possible, else aligned for `align`. npos: nowhere.
size_t in_place_offset(const std::string& body, size_t text_at, size_t align) {
  const auto base = reinterpret_cast<uintptr_t>(body.data());
  for (size_t a : {size_t{64}, align}) {
    size_t off = static_cast<size_t>((a - base % a) % a);
    if (off <= text_at) return off + (text_at - off) / a * a;
  }
  return std::string::npos;
}

Tensor tensor_from_b64(const Value& b64, std::optional<DType> dtype, const Value* shape_v, const std::string& what,
                       const InPlaceBody& in_place = {}) {
  if (!dtype) fail(what, "\"dtype\" is required with \"b64\"");
  if (!shape_v) fail(what, "\"shape\" is required with \"b64\"");
  if (!b64.IsString()) fail(what, "\"b64\" must be a base64 string, got " + describe(b64));
  Shape shape = parse_shape(*shape_v, what);
  int64_t numel = checked_numel(shape, what);
  std::string_view text(b64.GetString(), b64.GetStringLength());
  if (text.empty() && !in_place.cut.empty()) text = in_place.cut;
  DecodedB64* decoded = text.empty() ? in_place.decoded : nullptr;
  size_t want = static_cast<size_t>(numel) * dtype_size(*dtype);
  size_t got = decoded ? decoded->size : 0;
  try {
    if (!decoded) got = base64_decoded_size(text);
  } catch (const Error& e) {
    fail(what, "b64: " + e.message());
  }
  if (got != want) {
    fail(what, "b64 holds " + std::to_string(got) + " bytes, " + std::string(dtype_name(*dtype)) + shape_str(shape) +
                   " needs " + std::to_string(want));
  }
  // A bool tensor's bytes must each be 0 or 1.
  auto check_bools = [&](const void* data) {
    if (*dtype != DType::kBool) return;
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < want; ++i) {
      if (p[i] > 1) {
        fail(what, element(static_cast<int64_t>(i)) + ": a bool byte must be 0 or 1, got " + std::to_string(p[i]));
      }
    }
  };
  // The string holding the decoded bytes at `at` becomes the tensor's: the
  // pages past them are given back, and the tensor store keeps this view
  // instead of copying it.
  auto adopt = [&](std::string& holder, size_t at, const BodyShare& share) {
    check_bools(holder.data() + at);
    const size_t used = at + want;
    release_pages(holder.data() + used, holder.capacity() - used);
    std::shared_ptr<const std::string> owner = share();
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): the body is ours; ops never write their inputs
    auto storage = Storage::wrap(const_cast<char*>(owner->data()) + at, want, owner, want);
    return Tensor(TensorMeta{*dtype, std::move(shape)}, std::move(storage));
  };
  if (decoded) return adopt(decoded->bytes, decoded->offset, *in_place.share_decoded);
  const std::string* body = in_place.body;
  // The text lies in the body when the document was parsed from it in situ.
  const bool in_body = body && std::less_equal<>()(body->data(), text.data()) &&
                       std::less_equal<>()(text.data() + text.size(), body->data() + body->size());
  const size_t text_at = in_body ? static_cast<size_t>(text.data() - body->data()) : 0;
  const size_t at = in_body && want >= kInPlaceB64Bytes ? in_place_offset(*body, text_at, dtype_alignment(*dtype))
                                                        : std::string::npos;
  if (at != std::string::npos) {
    // Decoded over its own text: no second buffer of the tensor's size.
    char* out = in_place.body->data() + at;
    try {
      base64_decode_into(text, out);
    } catch (const Error& e) {
      fail(what, "b64: " + e.message());
    }
    return adopt(*in_place.body, at, *in_place.share);
  }
  Tensor t = Tensor::empty_host(*dtype, std::move(shape));
  try {
    base64_decode_into(text, t.data());
  } catch (const Error& e) {
    fail(what, "b64: " + e.message());
  }
  check_bools(t.data());
  return t;
}

// "data" (nested or flat row-major) as a tensor of `dtype` (inferred when
// absent) and `shape` (read off the nesting when absent).
Tensor tensor_from_data(const Value& data, std::optional<DType> dtype, const std::optional<Shape>& given_shape,
                        const std::string& what) {
  const bool complex = dtype && is_complex(*dtype);
  const int depth = data_depth(data, complex, what);
  Shape shape;
  Layout layout = Layout::kNested;
  if (given_shape) {
    shape = *given_shape;
    int64_t numel = checked_numel(shape, what);
    if (depth == static_cast<int>(shape.size())) {
      layout = Layout::kNested;
    } else if (depth == 1) {
      layout = Layout::kFlat;
      if (static_cast<int64_t>(data.Size()) != numel) {
        fail(what, "data has " + std::to_string(data.Size()) + " elements, shape " + shape_str(shape) + " needs " +
                       std::to_string(numel));
      }
    } else {
      fail(what, "data nested " + std::to_string(depth) + " deep matches neither shape " + shape_str(shape) +
                     " nor a flat list" + (complex ? " (complex elements are [re, im])" : ""));
    }
  } else {
    shape = infer_shape(data, depth);
    checked_numel(shape, what);
  }

  DType dt = dtype ? *dtype : infer_dtype(data, layout, shape, what);
  // Nested data must match the shape before the tensor is allocated: the
  // shape (given, or read off the first element of each level) only claims a
  // size, and {"shape": [3709551615], "data": []} must not ask for 15 GB.
  // (infer_dtype has walked the nesting already; a flat list was counted.)
  if (dtype && layout == Layout::kNested) walk(data, layout, shape, what, [](const Value&, int64_t) {});
  Tensor t = Tensor::empty_host(dt, shape);
  dispatch_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = t.data_ptr<T>();
    walk(data, layout, shape, what, [&](const Value& e, int64_t idx) { parse_leaf<T>(e, out, idx, what); });
  });
  return t;
}

}  // namespace

Tensor tensor_from_json_impl(const Value& v, const std::string& what, const InPlaceBody& in_place) {
  if (v.IsNumber() || v.IsBool()) return scalar_from_json(v, what);
  if (is_mx_json(v)) return mx_tensor_from_json(v, what);
  if (!v.IsObject()) {
    fail(what, "expected a tensor {\"dtype\", \"shape\", \"data\"} or a number, got " + describe(v));
  }
  const Value* dtype_v = nullptr;
  const Value* shape_v = nullptr;
  const Value* data_v = nullptr;
  const Value* b64_v = nullptr;
  for (const auto& m : v.GetObject()) {
    std::string_view key(m.name.GetString(), m.name.GetStringLength());
    const Value** slot = key == "dtype" || key == "datatype" ? &dtype_v
                         : key == "shape"                    ? &shape_v
                         : key == "data"                     ? &data_v
                         : key == "b64"                      ? &b64_v
                                                             : nullptr;
    if (key == "name") continue;
    if (!slot) {
      fail(what, "unknown key \"" + std::string(key.substr(0, 32)) +
                     "\" (a tensor has \"dtype\", \"shape\" and \"data\" or \"b64\")");
    }
    if (*slot) fail(what, "\"" + std::string(key) + "\" given twice");
    *slot = &m.value;
  }

  std::optional<DType> dtype;
  if (dtype_v) {
    if (!dtype_v->IsString()) fail(what, "\"dtype\" must be a string, got " + describe(*dtype_v));
    dtype = dtype_from_name(std::string_view(dtype_v->GetString(), dtype_v->GetStringLength()));
    if (!dtype) fail(what, "unknown dtype " + describe(*dtype_v));
  }
  if (data_v && b64_v) fail(what, "give either \"data\" or \"b64\", not both");
  if (b64_v) return tensor_from_b64(*b64_v, dtype, shape_v, what, in_place);
  if (!data_v) fail(what, "a tensor needs \"data\" or \"b64\"");
  std::optional<Shape> shape;
  if (shape_v) shape = parse_shape(*shape_v, what);
  return tensor_from_data(*data_v, dtype, shape, what);
}

Tensor tensor_from_json(const Value& v, const std::string& what) {
  return tensor_from_json_impl(v, what, {});
}

Tensor tensor_from_json_string(std::string_view json, const std::string& what) {
  rapidjson::Document doc;
  parse_json(json, doc, what);
  return tensor_from_json(doc, what);
}

// The text of the top-level object's "b64" string value in a JSON body,
// when it is at least kInPlaceB64Bytes and holds no escape, else empty.
// Only the bytes before it are scanned as JSON (for its depth); the
// value's end is one memchr.
std::string_view top_level_b64_value(std::string_view body) {
  // A body without the key's text (numeric data) is searched once, fast,
  // not scanned as JSON to its end.
  if (body.find("\"b64\"") == std::string_view::npos) return {};
  const size_t at = top_level_value(body, "b64");
  if (at == kJsonMore || at == kJsonAbsent || body[at] != '"') return {};  // the parser says what it is
  const size_t start = at + 1;
  const size_t end = body.find('"', start);
  if (end == std::string_view::npos || end - start < kInPlaceB64Bytes) return {};
  std::string_view value = body.substr(start, end - start);
  if (value.find('\\') != std::string_view::npos) return {};
  return value;
}

Tensor tensor_from_json_body(std::string& body, const std::string& what, const BodyShare& share) {
  if (share) {
    // A large b64 value is cut out before parsing: the parser (which checks
    // every character's UTF-8) reads the rest, a few hundred bytes, and the
    // base64 decoder alone reads the value, checking its alphabet.
    const std::string_view cut = top_level_b64_value(body);
    if (!cut.empty()) {
      const size_t start = static_cast<size_t>(cut.data() - body.data());
      std::string rest;
      rest.reserve(body.size() - cut.size());
      rest.append(body, 0, start).append(body, start + cut.size());
      rapidjson::Document doc;
      parse_json_insitu(rest, doc, what);
      return tensor_from_json_impl(doc, what, InPlaceBody{&body, &share, cut});
    }
  }
  // Plain numbers in "data": parsed straight into the tensor, no DOM.
  if (std::optional<Tensor> t = numeric_tensor_fast(body)) return std::move(*t);
  rapidjson::Document doc;
  parse_json_insitu(body, doc, what);
  return tensor_from_json_impl(doc, what, share ? InPlaceBody{&body, &share, {}} : InPlaceBody{});
}

Tensor tensor_from_json_request(HttpRequest& req, const std::string& what) {
  if (!req.decoded_b64) return tensor_from_json_body(req.body, what, [&req] { return req.share_body(); });
  rapidjson::Document doc;
  parse_json_insitu(req.body, doc, what);
  const BodyShare share = [&req] { return req.share(std::move(req.decoded_b64->bytes)); };
  InPlaceBody in_place;
  in_place.decoded = &*req.decoded_b64;
  in_place.share_decoded = &share;
  return tensor_from_json_impl(doc, what, in_place);
}

Tensor tensor_from_json_data(const Value& data, DType dtype, const Shape& shape, const std::string& what) {
  if (shape.size() > kMaxRank) {
    fail(what,
         "shape has rank " + std::to_string(shape.size()) + ", at most " + std::to_string(kMaxRank) + " is supported");
  }
  return tensor_from_data(data, dtype, shape, what);
}

double json_to_double(const Value& v, const std::string& what) {
  if (v.IsNumber()) return v.GetDouble();
  if (v.IsBool()) return v.GetBool() ? 1.0 : 0.0;
  double d;
  if (parse_nonfinite(v, &d)) return d;
  fail(what, "expected a number or \"nan\"/\"inf\"/\"-inf\", got " + describe(v));
}

}  // namespace tensord
