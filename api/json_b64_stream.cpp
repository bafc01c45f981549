#include "api/json_b64_stream.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "api/base64.h"
#include "ops/error.h"

namespace tensord {
namespace {

// Decodes `text` (whole groups, padding only at its end) to `out`; false on
// anything base64_decode_into rejects. Returns the bytes in `*got`.
bool decode(std::string_view text, std::string& out, size_t at, size_t* got) {
  try {
    *got = base64_decoded_size(text);
    if (out.size() < at + *got) out.resize(at + *got);  // reserved: no reallocation
    base64_decode_into(text, out.data() + at);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

JsonB64Stream::JsonB64Stream(size_t length, std::string&& out) : length_(length), out_(std::move(out)) {
  out_.clear();
  json_.resize(std::min(length_, kHeadBytes));
  if (done()) scan_head();
}

char* JsonB64Stream::next() {
  return phase_ == Phase::kValue ? window_.data() + window_used_ : json_.data() + json_used_;
}

size_t JsonB64Stream::room() const {
  const size_t left = length_ - received_;
  const size_t space = phase_ == Phase::kValue ? window_.size() - window_used_ : json_.size() - json_used_;
  return std::min(left, space);
}

void JsonB64Stream::commit(size_t n) {
  received_ += n;
  switch (phase_) {
    case Phase::kHead:
      json_used_ += n;
      return scan_head();
    case Phase::kValue:
      window_used_ += n;
      return decode_window(done());
    case Phase::kTail:
    case Phase::kWhole:
      json_used_ += n;
      return;
  }
}

size_t JsonB64Stream::value_start(std::string_view head) {
  const size_t at = top_level_value(head, "b64");
  if (at == kJsonMore || at == kJsonAbsent) return at;
  return head[at] == '"' ? at + 1 : kNever;
}

void JsonB64Stream::scan_head() {
  const size_t start = value_start(std::string_view(json_.data(), json_used_));
  if (start != kMore && start != kNever) return enter_value(start);
  if (start == kMore && json_used_ < json_.size() && !done()) return;
  // Not a top-level b64 string (or not within kHeadBytes): the whole text,
  // read into `out`'s memory (the pool's) rather than a fresh string.
  phase_ = Phase::kWhole;
  std::string text = std::move(out_);
  out_ = {};
  text.assign(json_.data(), json_used_);
  json_ = std::move(text);
  grow_json(json_used_);
}

void JsonB64Stream::enter_value(size_t start) {
  phase_ = Phase::kValue;
  window_.resize(kWindowBytes);
  window_used_ = json_used_ - start;
  std::memcpy(window_.data(), json_.data() + start, window_used_);
  json_.resize(start);
  json_used_ = start;
  // At most this many bytes: every character left but the closing quote
  // and the closing brace in base64. Grown as decoding goes (resize zeroes,
  // and just before decoding the zeroes are still in cache).
  const size_t most = (length_ - start) / 4 * 3 + 3;
  out_.reserve(most + 64);
  out_at_ = (64 - reinterpret_cast<uintptr_t>(out_.data()) % 64) % 64;
  out_.resize(out_at_);
  decode_window(done());
}

void JsonB64Stream::decode_window(bool last) {
  const char* w = window_.data();
  const size_t used = window_used_;
  size_t got = 0;
  if (const void* q = std::memchr(w, '"', used)) {
    // The value ends here: the rest of it, padding and all, then the text.
    const size_t end = static_cast<size_t>(static_cast<const char*>(q) - w);
    if (!decode(std::string_view(w, end), out_, out_at_ + out_used_, &got)) return fall_back();
    out_used_ += got;
    phase_ = Phase::kTail;
    const size_t tail = used - end;
    json_.resize(json_used_ + tail + (length_ - received_));
    std::memcpy(json_.data() + json_used_, w + end, tail);
    json_used_ += tail;
    window_ = {};
    window_used_ = 0;
    return;
  }
  if (last) return fall_back();  // the body ends inside the value
  // Whole groups without padding; a group holding '=' waits to see whether
  // the value ends with it, and characters after it mean it does not.
  size_t groups = used / 4 * 4;
  if (const void* eq = std::memchr(w, '=', used)) {
    const size_t padded = static_cast<size_t>(static_cast<const char*>(eq) - w) / 4 * 4;
    if (used - padded > 4) return fall_back();
    groups = padded;
  }
  if (!decode(std::string_view(w, groups), out_, out_at_ + out_used_, &got)) return fall_back();
  out_used_ += got;
  std::memmove(window_.data(), w + groups, used - groups);
  window_used_ = used - groups;
}

void JsonB64Stream::fall_back() {
  phase_ = Phase::kWhole;
  // What was decoded came from whole groups without padding: encoding it
  // again gives back the characters exactly.
  std::string text;
  text.reserve(length_);
  text.append(json_.data(), json_used_);
  const size_t chars = base64_encoded_size(out_used_);
  text.resize(json_used_ + chars);
  base64_encode_into(out_.data() + out_at_, out_used_, text.data() + json_used_);
  text.append(window_.data(), window_used_);
  json_ = std::move(text);
  json_used_ = json_.size();
  window_ = {};
  window_used_ = 0;
  out_used_ = 0;
  grow_json(json_used_);
}

void JsonB64Stream::grow_json(size_t used) {
  json_.resize(used + (length_ - received_));
}

}  // namespace tensord
