// libFuzzer target: the safetensors codec (api/safetensors.*, API.md 3.2).
// Input: a whole body (8-byte header length, JSON header, data).
// Invariants: parsing fails only with bad_request; every parsed tensor lies
// within what the body holds (read all of it: ASan checks the zero-copy
// aliasing, after the caller dropped its reference to the body); the parsed
// tensors and metadata encode, and the encoding parses back to the same
// names, order, dtypes, shapes, bytes and metadata and re-encodes to the same
// bytes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "api/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

namespace tensord::fuzz {
namespace {

void check_same(const SafetensorsFile& a, const SafetensorsFile& b, const char* what) {
  check(a.metadata == b.metadata, std::string(what) + ": metadata changed");
  check(a.tensors.size() == b.tensors.size(), std::string(what) + ": tensor count changed");
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    check(a.tensors[i].first == b.tensors[i].first, std::string(what) + ": tensor names or order changed");
    check(same_tensor(a.tensors[i].second, b.tensors[i].second),
          std::string(what) + ": tensor '" + a.tensors[i].first + "' changed");
  }
}

}  // namespace
}  // namespace tensord::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensord;
  using namespace tensord::fuzz;
  SafetensorsFile f;
  {
    auto body = std::make_shared<const std::string>(reinterpret_cast<const char*>(data), size);
    if (!expect_ok_or({ErrorCode::kBadRequest}, "parse_safetensors", [&] { f = parse_safetensors(body); })) return 0;
  }  // the tensors alone keep the body alive now
  uint64_t sum = 0;
  for (const auto& [name, t] : f.tensors) {
    check(t.defined() && t.on_host(), "tensor '" + name + "' is not a host tensor");
    check(name != "__metadata__", "a tensor named __metadata__ was accepted");
    const auto* p = static_cast<const unsigned char*>(t.data());
    for (size_t i = 0; i < t.nbytes(); ++i) sum += p[i];
    if (t.dtype() == DType::kBool) {
      for (size_t i = 0; i < t.nbytes(); ++i) check(p[i] <= 1, "tensor '" + name + "': a bool byte is not 0 or 1");
    }
  }
  (void)sum;

  std::string enc;
  expect_no_throw("encode_safetensors", [&] { enc = encode_safetensors(f.tensors, f.metadata); });
  uint64_t n = 0;
  check(enc.size() >= 8, "encoding shorter than its header length");
  std::memcpy(&n, enc.data(), 8);  // little-endian hosts only, as the codec
  check(n % 8 == 0 && n <= enc.size() - 8,
        "encoded header length " + std::to_string(n) + " is not padded or in bounds");
  SafetensorsFile g;
  expect_no_throw("parse_safetensors(encoding)",
                  [&] { g = parse_safetensors(std::make_shared<const std::string>(enc)); });
  check_same(f, g, "safetensors round trip");
  std::string enc2;
  expect_no_throw("encode_safetensors again", [&] { enc2 = encode_safetensors(g.tensors, g.metadata); });
  check(enc == enc2, "encoding is not a fixed point");
  return 0;
}
