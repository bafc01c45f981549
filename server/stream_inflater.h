// A gzip or deflate request body inflated piece by piece as it arrives
// (content_coding.h): the session feeds each read of a compressed body in
// and never holds the compressed bytes whole; inflate_body feeds a held
// one. The output's growth is announced before it happens, so the caller
// charges the tenant and checks the limit before the bytes are held. One
// body per object; not thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/content_coding.h"

struct z_stream_s;

namespace tensord {

class StreamInflater {
 public:
  // Called before the output grows with the bytes it may hold once the
  // step is written (at most `grow_step` more), and at finish() with what
  // it holds; what it throws stops the inflation (nothing more written).
  using OnGrow = std::function<void(size_t total)>;

  // `size_hint`: the output's first allocation, at most `grow_step` (it
  // doubles from there, at most to max_bytes + 1, so it never holds more
  // than twice what on_grow announced).
  StreamInflater(ContentCoding coding, size_t max_bytes, size_t size_hint, OnGrow on_grow,
                 size_t grow_step = size_t{1} << 20);
  ~StreamInflater();
  StreamInflater(const StreamInflater&) = delete;
  StreamInflater& operator=(const StreamInflater&) = delete;

  // Inflates all of `in`. Past max_bytes: payload_too_large (a zip bomb
  // stops here, however much of it is still to come); bytes that are not
  // in the coding: bad_request. gzip members may follow one another
  // (RFC 1952 2.2); the zlib format has one stream.
  void feed(std::string_view in);
  // The body has ended: its inflated bytes (the last step's unused part
  // announced back through on_grow). A stream cut short is bad_request.
  std::string finish();

  size_t size() const { return have_; }

 private:
  ContentCoding coding_;
  size_t max_bytes_;
  size_t grow_step_;
  OnGrow on_grow_;
  std::unique_ptr<z_stream_s> z_;
  std::string out_;
  size_t have_ = 0;
  size_t reported_ = 0;
  bool ended_ = false;  // the current stream (gzip member) reached its end
};

}  // namespace tensord
