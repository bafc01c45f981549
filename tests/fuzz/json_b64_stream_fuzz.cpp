// libFuzzer target: a JSON body decoded while it arrives
// (api/json_b64_stream.h). Input: one byte that picks the pieces
// the body arrives in, then the body. Invariants: the stream never throws;
// a body it did not decode comes back byte for byte; one it decoded is the
// skeleton with the value's canonical base64 cut out (re-encoding the bytes
// and putting them back gives the body); and the request's tensor agrees
// with the whole body's (tensor_from_json_body) on accepting and on the
// bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "api/base64.h"
#include "api/json_b64_stream.h"
#include "api/json_tensor.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensord;
  using namespace tensord::fuzz;
  if (size == 0) return 0;
  const unsigned split = data[0];
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);

  JsonB64Stream s(body.size(), std::string());
  size_t at = 0;
  for (size_t i = 0; at < body.size(); ++i) {
    check(s.room() > 0, "no room before the body's end");
    // Pieces of 1..split+1 bytes, varying.
    const size_t want = 1 + (i * 7 + split) % (split + 1);
    const size_t n = std::min({want, s.room(), body.size() - at});
    std::memcpy(s.next(), body.data() + at, n);
    expect_no_throw("JsonB64Stream::commit", [&] { s.commit(n); });
    at += n;
  }
  check(s.done() && s.room() == 0, "not done at the body's end");

  std::string whole = body;
  Tensor expected;
  const bool whole_ok = expect_ok_or({ErrorCode::kBadRequest}, "tensor_from_json_body",
                                     [&] { expected = tensor_from_json_body(whole, "body"); });
  if (!s.decoded()) {
    check(s.take_json() == body, "a body that was not decoded came back changed");
    return 0;
  }
  const size_t offset = s.out_offset(), n = s.out_size();
  std::string out = s.take_out();
  std::string json = s.take_json();
  check(offset % 64 == (64 - reinterpret_cast<uintptr_t>(out.data()) % 64) % 64, "decoded bytes not aligned");
  const size_t start = JsonB64Stream::value_start(json);
  check(start <= json.size(), "the skeleton has no b64 value");
  const std::string text = base64_encode(out.data() + offset, n);
  check(json.substr(0, start) + text + json.substr(start) == body, "skeleton + re-encoded bytes is not the body");

  HttpRequest req;
  req.body = json;
  req.decoded_b64.emplace();
  req.decoded_b64->offset = offset;
  req.decoded_b64->size = n;
  req.decoded_b64->bytes = std::move(out);
  Tensor t;
  const bool ok = expect_ok_or({ErrorCode::kBadRequest}, "tensor_from_json_request",
                               [&] { t = tensor_from_json_request(req, "body"); });
  check(ok == whole_ok,
        ok ? "the stream accepted what the whole body refused" : "the stream refused what the whole body accepted");
  if (ok) check(same_tensor(t, expected), "the stream decoded another tensor");
  return 0;
}
