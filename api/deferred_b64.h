// Large b64 values left out of a JSON writer's buffer and encoded as the
// response is sent (egress without copies, for b64 as for safetensors).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include <rapidjson/stringbuffer.h>

#include "api/http_types.h"

namespace tensord {

// While one is alive on a thread, the JSON writers of that thread leave a
// large b64 value (kMinBytes of tensor or more) out of their buffer and
// note it here (json_tensor_write.cpp); body() then makes the response: the
// text around the values from the buffer, each value a view encoded a piece
// at a time as it is sent (BodyView::fill). A 256 MiB tensor's answer then
// needs no 341 MB buffer, and its first bytes leave at once. Scopes nest
// (the innermost takes the values).
class DeferredB64 {
 public:
  static constexpr size_t kMinBytes = size_t{1} << 20;

  DeferredB64();
  ~DeferredB64();
  DeferredB64(const DeferredB64&) = delete;
  DeferredB64& operator=(const DeferredB64&) = delete;

  static DeferredB64* current();
  // The base64 of `n` bytes at `data` (kept alive by `owner`) belongs at
  // offset `at` of the writer's buffer.
  void add(size_t at, const void* data, size_t n, std::shared_ptr<const void> owner);
  // The response body: the buffer's text with each value in its place.
  std::vector<BodyView> body(const std::shared_ptr<rapidjson::StringBuffer>& sb);

 private:
  struct Value {
    size_t at;
    BodyView view;
  };
  DeferredB64* outer_;
  std::vector<Value> values_;
};

}  // namespace tensord
