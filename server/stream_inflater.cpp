#include "server/stream_inflater.h"

#include <zlib.h>

#include <algorithm>

#include "ops/error.h"

namespace tensord {

StreamInflater::StreamInflater(ContentCoding coding, size_t max_bytes, size_t size_hint, OnGrow on_grow,
                               size_t grow_step)
    : coding_(coding),
      max_bytes_(max_bytes),
      grow_step_(std::max<size_t>(grow_step, 1)),
      on_grow_(std::move(on_grow)),
      z_(std::make_unique<z_stream_s>()) {
  if (inflateInit2(z_.get(), zlib_window_bits(coding)) != Z_OK) {
    z_.reset();
    throw Error(ErrorCode::kInternal, "zlib: inflateInit2 failed");
  }
  // At most a step to start with: what is allocated past what on_grow
  // announced stays under what was announced (the buffer doubles).
  out_.resize(std::min({std::max<size_t>(size_hint, 64 << 10), grow_step_, max_bytes_ + 1}));
}

StreamInflater::~StreamInflater() {
  if (z_) inflateEnd(z_.get());
}

void StreamInflater::feed(std::string_view in) {
  z_stream& z = *z_;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));  // NOLINT: zlib's API is not const
  size_t in_left = in.size();
  const std::string what = std::string("the ") + coding_name(coding_) + " body";
  auto not_valid = [&] {
    return Error(ErrorCode::kBadRequest, what + " is not valid " + coding_name(coding_) + " data");
  };
  for (;;) {
    if (ended_) {
      if (in_left == 0) return;
      if (coding_ != ContentCoding::kGzip) throw Error(ErrorCode::kBadRequest, what + " has bytes after its end");
      if (inflateReset(&z) != Z_OK) throw Error(ErrorCode::kInternal, "zlib: inflateReset failed");
      ended_ = false;
    }
    // have_ <= max_bytes_ here (checked below), so the buffer can still grow.
    if (have_ == out_.size()) out_.resize(std::min<size_t>(out_.size() * 2, max_bytes_ + 1));
    const uInt in_chunk = static_cast<uInt>(std::min<size_t>(in_left, 1u << 30));
    // At most grow_step_ bytes per call, announced before they are written.
    const uInt out_chunk = static_cast<uInt>(std::min<size_t>(out_.size() - have_, grow_step_));
    if (on_grow_ && have_ + out_chunk > reported_) {
      const size_t next = std::min(have_ + out_chunk, max_bytes_);
      on_grow_(next);
      reported_ = next;
    }
    z.avail_in = in_chunk;
    z.next_out = reinterpret_cast<Bytef*>(out_.data() + have_);
    z.avail_out = out_chunk;
    const int rc = inflate(&z, Z_NO_FLUSH);
    in_left -= in_chunk - z.avail_in;
    have_ += out_chunk - z.avail_out;
    if (have_ > max_bytes_) {
      throw Error(ErrorCode::kPayloadTooLarge, what + " inflates past the " + std::to_string(max_bytes_) +
                                                   "-byte limit on request bodies (--max-body-bytes)");
    }
    if (rc == Z_STREAM_END) {
      ended_ = true;
      continue;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) throw not_valid();
    // Output room left and the input used up: the rest comes with the next piece.
    if (z.avail_out != 0) {
      if (in_left == 0) return;
      if (rc == Z_BUF_ERROR) throw not_valid();
    }
  }
}

std::string StreamInflater::finish() {
  if (!ended_) {
    throw Error(ErrorCode::kBadRequest,
                std::string("the ") + coding_name(coding_) + " body ends before its compressed stream does");
  }
  out_.resize(have_);
  if (on_grow_ && have_ != reported_) {
    on_grow_(have_);  // the last step's unused part back
    reported_ = have_;
  }
  return std::move(out_);
}

}  // namespace tensord
