// libFuzzer target: the JSON tensor codec (api/json_tensor.*, API.md 3.1).
// Input: JSON text, as a PUT /v1/tensors body or an "inputs" entry.
// Invariants: decoding fails only with bad_request; a tensor that decodes
// re-encodes (flat data and b64) to text that decodes again to the same
// dtype and shape, with the same bytes for b64 and for data whose elements
// are not NaN (JSON has one NaN, so NaN payloads are not kept); re-encoding
// that is a fixed point. The in-place parser (a request body's) agrees with
// the copying one on every input.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/json_tensor.h"
#include "tests/fuzz/fuzz_util.h"

namespace tensord::fuzz {
namespace {

bool is_nan_bits(DType dt, const unsigned char* p) {
  uint16_t h;
  switch (dt) {
    case DType::kFloat16:
      std::memcpy(&h, p, 2);
      return (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
    case DType::kBFloat16:
      std::memcpy(&h, p, 2);
      return (h & 0x7F80) == 0x7F80 && (h & 0x7F);
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f != f;
    }
    case DType::kFloat64: {
      double f;
      std::memcpy(&f, p, 8);
      return f != f;
    }
    case DType::kComplex64:
      return is_nan_bits(DType::kFloat32, p) || is_nan_bits(DType::kFloat32, p + 4);
    case DType::kComplex128:
      return is_nan_bits(DType::kFloat64, p) || is_nan_bits(DType::kFloat64, p + 8);
    case DType::kFloat8E4M3FN:
      return (*p & 0x7F) == 0x7F;
    case DType::kFloat8E5M2:
      return (*p & 0x7F) > 0x7C;
    case DType::kFloat8E8M0FNU:
      return *p == 0xFF;
    default:
      return false;
  }
}

// Same dtype and shape; bytes equal wherever `a`'s element is not a NaN.
bool same_up_to_nan(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape() || a.nbytes() != b.nbytes()) return false;
  const size_t es = dtype_size(a.dtype());
  const auto* pa = static_cast<const unsigned char*>(a.data());
  const auto* pb = static_cast<const unsigned char*>(b.data());
  for (size_t off = 0; off < a.nbytes(); off += es) {
    if (std::memcmp(pa + off, pb + off, es) != 0 &&
        !(is_nan_bits(a.dtype(), pa + off) && is_nan_bits(b.dtype(), pb + off))) {
      return false;
    }
  }
  return true;
}

Tensor decode_again(const std::string& text, const char* where) {
  Tensor t;
  expect_no_throw(where, [&] { t = tensor_from_json_string(text, "x"); });
  return t;
}

}  // namespace
}  // namespace tensord::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensord;
  using namespace tensord::fuzz;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // The same text parsed in place, as a request body is: it must agree with
  // the copying parser on accepting and on the tensor.
  std::string body(text);
  Tensor in_place;
  const bool in_place_ok = expect_ok_or({ErrorCode::kBadRequest}, "tensor_from_json_body",
                                        [&] { in_place = tensor_from_json_body(body, "x"); });
  Tensor t;
  if (!expect_ok_or({ErrorCode::kBadRequest}, "tensor_from_json_string",
                    [&] { t = tensor_from_json_string(text, "x"); })) {
    check(!in_place_ok, "the in-place parser accepted what the copying one refused");
    return 0;
  }
  check(in_place_ok, "the in-place parser refused what the copying one accepted");
  check(same_up_to_nan(t, in_place), "the in-place parser decoded another tensor");
  check(t.defined() && t.on_host(), "decoded tensor is not a host tensor");
  check(t.nbytes() == static_cast<size_t>(t.numel()) * dtype_size(t.dtype()), "decoded tensor's size is off");

  // b64: bit-exact.
  std::string b64;
  expect_no_throw("tensor_to_json_string(b64)", [&] { b64 = tensor_to_json_string(t, true); });
  Tensor tb = decode_again(b64, "decoding the b64 encoding");
  check(same_tensor(t, tb), "b64 round trip changed the tensor: " + b64);

  // Flat data: the same values (NaN payloads aside), and a fixed point.
  std::string flat;
  expect_no_throw("tensor_to_json_string(data)", [&] { flat = tensor_to_json_string(t, false); });
  Tensor tf = decode_again(flat, "decoding the data encoding");
  check(same_up_to_nan(t, tf), "data round trip changed the tensor: " + flat);
  std::string flat2;
  expect_no_throw("tensor_to_json_string(data) again", [&] { flat2 = tensor_to_json_string(tf, false); });
  check(flat == flat2, "encoding is not a fixed point:\n" + flat + "\n" + flat2);
  return 0;
}
