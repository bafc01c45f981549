// The JSON tensor codec of API.md 3.1.
//
// Decoding accepts
//   {"dtype": "float32", "shape": [2, 2], "data": [[1, 2], [3, 4]]}  nested
//   {"dtype": "float32", "shape": [2, 2], "data": [1, 2, 3, 4]}      flat, row-major
//   {"dtype": "bfloat16", "shape": [4], "b64": "<little-endian bytes>"}
//   2.5 / 7 / true                                                   a bare scalar, shape []
// "datatype" (KServe v2) is accepted for "dtype" and "name" is ignored; any
// other key is bad_request (a typo must not silently change the tensor).
// Without "shape", nested data gives its shape (a bare value: []); b64 needs
// both dtype and shape. Without "dtype", the dtype is inferred as
// torch.tensor does: all bools -> bool, all integers -> int64, else float32
// (bare scalars likewise). Elements: numbers; the strings "nan", "inf",
// "-inf" (also "+inf", "infinity", any letter case) for floats; true/false
// for any dtype (as 1/0), 0/1 for bool; [re, im] for complex dtypes.
// Integer dtypes take integral values in the dtype's range only. Every
// violation throws Error(kBadRequest, "<what>: <reason>"); no input crashes
// (nesting is bounded by the rank limit, 16, and checked before recursing).
//
// Encoding writes {"dtype", "shape", "data"} with flat row-major data (a
// list even for shape []), or {"dtype", "shape", "b64"}. float32 and the
// narrow floats print the shortest decimal that reads back (via double, as
// every JSON parser does) to the same float32, float64 the shortest that
// reads back to the same double; both always carry a '.' or an exponent.
// Non-finite values are the strings "nan", "inf", "-inf"; complex elements
// are [re, im].
//
// Parse untrusted text with parse_json (api/json_parse.h) first.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "api/http_types.h"
#include "ops/tensor.h"

namespace tensord {

// RapidJSON flags for code that calls Document::Parse itself: iterative and
// UTF-8 validating. Prefer parse_json (api/json_parse.h): it also rounds
// numbers correctly, rejects NUL bytes and bounds nesting. (No
// kParseFullPrecisionFlag: in RapidJSON 1.1.0 it has undefined behaviour on
// inputs such as "0e100".)
inline constexpr unsigned kJsonParseFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;

// A host tensor from a JSON value (see above). `what` names the value in
// error messages, e.g. "inputs.x".
Tensor tensor_from_json(const rapidjson::Value& v, const std::string& what);
// Parses `json` with parse_json first (a syntax error is bad_request).
Tensor tensor_from_json_string(std::string_view json, const std::string& what);
// Moves a request body out, shared (HttpRequest::share_body).
using BodyShare = std::function<std::shared_ptr<const std::string>()>;
// The same from a request body parsed in place (api/json_parse.h): a b64
// payload is decoded from the body straight into the tensor; `body` is
// left unescaped, not for reuse. With `share`, a payload of 1 MiB or more
// is decoded over its own text in the body, the rest of the text's pages
// are given back, and the tensor aliases the body that `share` moves out:
// an upload's memory peaks at its body's size, not body + tensor.
Tensor tensor_from_json_body(std::string& body, const std::string& what, const BodyShare& share = {});
// A request's JSON body as one tensor: the above with req.share_body(), or,
// when the session decoded the body's "b64" value as it arrived
// (HttpRequest::decoded_b64), the tensor adopts those bytes.
Tensor tensor_from_json_request(HttpRequest& req, const std::string& what);
// Only the "data" value (nested or flat row-major, elements as above) of a
// tensor whose dtype and shape are known (KServe v2 inputs, API.md 11).
Tensor tensor_from_json_data(const rapidjson::Value& data, DType dtype, const Shape& shape, const std::string& what);

// Writes a host tensor as one JSON value. Instantiated for
// rapidjson::Writer<StringBuffer> and PrettyWriter<StringBuffer>.
template <class Writer>
void tensor_to_json(const Tensor& t, Writer& w, bool use_b64);
std::string tensor_to_json_string(const Tensor& t, bool use_b64 = false);
// The same text as a response body that leaves from the writer's buffer.
// Its large b64 values are encoded as the body is sent (api/deferred_b64.h).
std::vector<BodyView> tensor_to_json_body(const Tensor& t, bool use_b64);
// Its fields alone (dtype, shape, data or b64), inside an object the
// caller opened (to add fields of its own, as "replicated").
template <class Writer>
void tensor_fields_to_json(const Tensor& t, Writer& w, bool use_b64);
// Only the flat row-major "data" list of a host tensor, elements as above.
template <class Writer>
void tensor_data_to_json(const Tensor& t, Writer& w);

// A float64 scalar as a JSON number (shortest round-trip form) or, when not
// finite, the string "nan" / "inf" / "-inf".
template <class Writer>
void write_json_double(Writer& w, double v);
// A JSON number, bool (1/0) or non-finite string as double; else bad_request
// naming `what`.
double json_to_double(const rapidjson::Value& v, const std::string& what);

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;
using JsonPrettyWriter = rapidjson::PrettyWriter<rapidjson::StringBuffer>;
extern template void tensor_to_json<JsonWriter>(const Tensor&, JsonWriter&, bool);
extern template void tensor_to_json<JsonPrettyWriter>(const Tensor&, JsonPrettyWriter&, bool);
extern template void tensor_fields_to_json<JsonWriter>(const Tensor&, JsonWriter&, bool);
extern template void write_json_double<JsonWriter>(JsonWriter&, double);
extern template void tensor_data_to_json<JsonWriter>(const Tensor&, JsonWriter&);
extern template void write_json_double<JsonPrettyWriter>(JsonPrettyWriter&, double);

}  // namespace tensord
