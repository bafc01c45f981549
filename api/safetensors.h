// The safetensors codec of API.md 3.2: 8-byte little-endian header length N,
// N bytes of JSON header, then the tensor bytes.
//
// Parsing is strict: every malformed body is Error(kBadRequest) naming what
// is wrong. Checked: N <= 100'000'000 and within the body; the header is a
// JSON object (UTF-8 validated, parsed iteratively so nesting cannot
// overflow the stack) without duplicate keys; "__metadata__", if present, is
// an object of strings; every other entry is exactly {"dtype", "shape",
// "data_offsets"} with a known tag (C128 included), a valid shape
// (shape_numel), 0 <= b <= e <= data size, e - b == numel * dtype_size,
// bool bytes 0 or 1, and no two tensors' byte ranges overlap. Gaps between
// tensors and trailing bytes are allowed (the contract asks for in-bounds and
// non-overlapping only; the Rust safetensors crate is stricter).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/tensor.h"

namespace tensord {

inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// MX tensors (API.md 7, api/mx_wire.h): parsing joins each described pair
// `<name>` + `<name>.scale` into one MX tensor (removing its metadata key);
// encoding splits them and adds the descriptions to the metadata.
struct SafetensorsFile {
  // In the order the header lists them (not by offset).
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

// Parses a safetensors body. Zero-copy: a tensor whose bytes sit at an
// address aligned for its element type aliases `body` (its Storage keeps
// `body` alive, so one small tensor kept long-term pins the whole body:
// clone_host() what you store); an unaligned one is copied to fresh host
// memory.
SafetensorsFile parse_safetensors(const std::shared_ptr<const std::string>& body);

// Encodes host tensors. The header lists "__metadata__" (when not empty)
// then the tensors in the given order, padded with spaces to a multiple of 8
// bytes. The data section is contiguous without gaps (as the Rust crate
// requires) and laid out by element size, largest first, keeping the given
// order among equal sizes: every tensor's offset is then a multiple of its
// element size, so all are aligned when the body is 8-byte aligned. Names
// must be unique and not "__metadata__" (bad_request otherwise).
std::string encode_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                               const std::map<std::string, std::string>& metadata);

// The same file as its header (the 8-byte length and the JSON, padded) and
// the tensors in data order, for writing without copying their bytes: the
// body is `header` followed by each tensor's bytes.
struct SafetensorsParts {
  std::string header;
  std::vector<Tensor> data;
};
SafetensorsParts encode_safetensors_parts(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                          const std::map<std::string, std::string>& metadata);

}  // namespace tensord
