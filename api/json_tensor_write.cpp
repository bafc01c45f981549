// The writing half of the JSON tensor codec (api/json_tensor.h): numbers
// written so that they read back exactly, b64 text encoded straight into
// the writer's buffer. The reading half is json_tensor.cpp.
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
#include "api/json_parse.h"
#include "api/json_writer.h"
#include "api/mx_wire.h"
#include "api/deferred_b64.h"
#include "ops/cpu/huge_pages.h"
#include "ops/dispatch.h"
#include "ops/error.h"
#include "ops/kernels/scalar_traits.h"

namespace tensord {
namespace {

// Writes the number text in [buf, end) (the buffer has room for two more
// characters), with ".0" appended to integral-looking text so that it reads
// back as a float.
template <class W>
void write_number_text(W& w, char* buf, char* end) {
  bool has_point = false;
  for (char* c = buf; c != end; ++c) has_point |= (*c == '.' || *c == 'e' || *c == 'E');
  if (!has_point) {
    *end++ = '.';
    *end++ = '0';
  }
  w.RawValue(buf, static_cast<size_t>(end - buf), rapidjson::kNumberType);
}

template <class W>
bool write_nonfinite(W& w, double v) {
  if (std::isfinite(v)) return false;
  w.String(std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
  return true;
}

template <class W>
void write_float32(W& w, float f) {
  if (write_nonfinite(w, f)) return;
  char buf[64];
  auto r = std::to_chars(buf, buf + 48, f);
  // Readers parse to double and round to float32: check that the shortest
  // float32 text survives the double rounding, else print the exact double.
  double back = 0;
  auto p = std::from_chars(buf, r.ptr, back);
  if (p.ec != std::errc() || static_cast<float>(back) != f) r = std::to_chars(buf, buf + 48, static_cast<double>(f));
  write_number_text(w, buf, r.ptr);
}

template <class W>
void write_float64(W& w, double d) {
  if (write_nonfinite(w, d)) return;
  char buf[64];
  auto r = std::to_chars(buf, buf + 48, d);
  write_number_text(w, buf, r.ptr);
}

template <class W, class T>
void write_elements(W& w, const Tensor& t) {
  const char* base = static_cast<const char*>(t.data());
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      w.Bool(base[i] != 0);
    } else {
      T x;
      std::memcpy(&x, base + static_cast<size_t>(i) * sizeof(T), sizeof(T));
      if constexpr (std::is_same_v<T, int64_t>) {
        w.Int64(x);
      } else if constexpr (std::is_integral_v<T>) {
        w.Int(static_cast<int>(x));
      } else if constexpr (std::is_same_v<T, double>) {
        write_float64(w, x);
      } else if constexpr (std::is_same_v<T, float>) {
        write_float32(w, x);
      } else if constexpr (std::is_same_v<T, std::complex<float>>) {
        w.StartArray();
        write_float32(w, x.real());
        write_float32(w, x.imag());
        w.EndArray();
      } else if constexpr (std::is_same_v<T, std::complex<double>>) {
        w.StartArray();
        write_float64(w, x.real());
        write_float64(w, x.imag());
        w.EndArray();
      } else {
        write_float32(w, kernels::ScalarTraits<T>::load(x));  // exact
      }
    }
  }
}

}  // namespace

template <class Writer>
void tensor_data_to_json(const Tensor& t, Writer& w) {
  TENSORD_ASSERT(t.defined() && t.device().type == DeviceType::kCPU);
  w.StartArray();
  dispatch_dtype(t.dtype(), [&](auto tag) { write_elements<Writer, typename decltype(tag)::type>(w, t); });
  w.EndArray();
}

// The writer's output stream (RapidJSON keeps it protected): a b64 text is
// encoded straight into it instead of into a string the writer would then
// scan for escapes and copy.
template <class Writer>
auto& output_stream(Writer& w) {
  struct Peek : Writer {
    static auto* of(Writer& w) { return w.*(&Peek::os_); }
  };
  return *Peek::of(w);
}

// `n` bytes as a JSON string of their base64 (no character needs escaping).
// Under a DeferredB64 scope, a large value's text is left to be encoded as
// the response is sent (`owner` keeps the bytes alive until then).
template <class Writer>
void write_b64_string(Writer& w, const void* data, size_t n, const std::shared_ptr<const void>& owner) {
  static const char kQuote = '"';
  w.RawValue(&kQuote, 1, rapidjson::kStringType);  // the separator and the opening quote
  auto& os = output_stream(w);
  if (DeferredB64* deferred = DeferredB64::current(); deferred && owner && n >= DeferredB64::kMinBytes) {
    deferred->add(os.GetSize(), data, n, owner);
    os.Put('"');
    return;
  }
  const size_t len = base64_encoded_size(n);
  os.Reserve(len + 1 + 256);  // room for the closing text without regrowing
  char* p = os.Push(len + 1);
  advise_huge_pages(p, len);  // not yet touched: faults in 2 MiB at a time
  base64_encode_into(data, n, p);
  p[len] = '"';
}

template <class Writer>
void tensor_fields_to_json(const Tensor& t, Writer& w, bool use_b64) {
  TENSORD_ASSERT(t.defined() && t.device().type == DeviceType::kCPU);
  if (const MxMeta* m = t.meta().mx.get()) {  // api/mx_wire.h's JSON form
    w.Key("mx");
    std::string_view f = mx_format_name(m->format);
    w.String(f.data(), static_cast<rapidjson::SizeType>(f.size()));
    w.Key("block_size");
    w.Int64(m->block_size);
    w.Key("axis");
    w.Int64(m->axis);
    w.Key("shape");
    w.StartArray();
    for (int64_t d : m->shape) w.Int64(d);
    w.EndArray();
    w.Key("elements");
    tensor_to_json(mx_elements(t), w, use_b64);
    w.Key("scale");
    tensor_to_json(mx_scale(t), w, use_b64);
    return;
  }
  w.Key("dtype");
  std::string_view name = dtype_name(t.dtype());
  w.String(name.data(), static_cast<rapidjson::SizeType>(name.size()));
  w.Key("shape");
  w.StartArray();
  for (int64_t d : t.shape()) w.Int64(d);
  w.EndArray();
  if (use_b64) {
    w.Key("b64");
    write_b64_string(w, t.data(), t.nbytes(), t.storage());
  } else {
    w.Key("data");
    tensor_data_to_json(t, w);
  }
}

template <class Writer>
void tensor_to_json(const Tensor& t, Writer& w, bool use_b64) {
  w.StartObject();
  tensor_fields_to_json(t, w, use_b64);
  w.EndObject();
}

std::vector<BodyView> tensor_to_json_body(const Tensor& t, bool use_b64) {
  DeferredB64 deferred;
  auto sb = std::make_shared<rapidjson::StringBuffer>();
  JsonWriter w(*sb);
  tensor_to_json(t, w, use_b64);
  return deferred.body(sb);
}

std::string tensor_to_json_string(const Tensor& t, bool use_b64) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  tensor_to_json(t, w, use_b64);
  return std::string(sb.GetString(), sb.GetSize());
}

template <class Writer>
void write_json_double(Writer& w, double v) {
  write_float64(w, v);
}

template void tensor_to_json<JsonWriter>(const Tensor&, JsonWriter&, bool);
template void tensor_fields_to_json<JsonWriter>(const Tensor&, JsonWriter&, bool);
template void tensor_to_json<JsonPrettyWriter>(const Tensor&, JsonPrettyWriter&, bool);
template void write_json_double<JsonWriter>(JsonWriter&, double);
template void tensor_data_to_json<JsonWriter>(const Tensor&, JsonWriter&);
template void write_json_double<JsonPrettyWriter>(JsonPrettyWriter&, double);

}  // namespace tensord
