// MX tensors (ops/mx_tensor.h) on the wire, API.md 7.
//
// safetensors: two entries, `<name>` (the packed elements, U8, the logical
// shape with the block axis packed) and `<name>.scale` (F8_E8M0, the axis
// divided by block_size), described by __metadata__["<name>"], a JSON string
// {"mx": "<format>", "block_size": 32, "axis": -1, "shape": [...]} (the
// logical shape; keys in this order, compact, as written here).
//
// JSON (API.md 3.1 extended): {"mx": "<format>", "block_size": 32, "axis":
// -1, "shape": [...], "elements": <uint8 tensor>, "scale": <float8_e8m0fnu
// tensor>}, the parts as any JSON tensor ("data" or "b64").
//
// Decoding is strict, all bad_request: unknown format, keys missing, unknown
// or of the wrong type, a part missing or of another dtype or shape than the
// description gives (a scale count that does not match, a packed size that
// does not match the logical shape), block_size or axis out of range.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <rapidjson/document.h>

#include "api/safetensors.h"
#include "ops/mx_tensor.h"

namespace tensord {

// The description's JSON text (the __metadata__ value).
std::string mx_metadata_json(const MxMeta& m);

// Joins MX pairs described in f.metadata into single MX tensors (at the
// elements' position; the `.scale` entry and the metadata key are removed).
// A metadata value is an MX description when its key names a tensor of the
// file (or `<key>.scale` does) and it is a JSON object with an "mx" key;
// other metadata is left alone.
void join_mx_tensors(SafetensorsFile& f);

// The safetensors entries of `tensors` with every MX tensor split into its
// two parts; their descriptions are added to `metadata` (a name that is a
// metadata key already is bad_request). Host tensors.
std::vector<std::pair<std::string, Tensor>> split_mx_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                                             std::map<std::string, std::string>& metadata);

// True when a JSON tensor object is in the MX form (has an "mx" key).
bool is_mx_json(const rapidjson::Value& v);
// An MX host tensor from its JSON form; `what` names it in errors.
Tensor mx_tensor_from_json(const rapidjson::Value& v, const std::string& what);

}  // namespace tensord
