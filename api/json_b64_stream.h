// A JSON request body whose top-level "b64" value is decoded while the body
// arrives (API.md 3.1): the session reads the body's bytes into
// next() and commits them; the first bytes (the JSON up to the value) are
// kept, the value's characters pass through a small window and are decoded
// straight into `out`, and what follows the value is kept again. An upload
// of a 256 MiB tensor as JSON then holds the tensor's bytes and a window,
// not the 341 MiB of text, and its decoding runs as the bytes come in.
//
// Never throws on bad input and never rejects: whatever is not a plain
// top-level base64 string (no "b64" key in the first kHeadBytes, a value
// that is not a string, an escape, a bad character, bad padding, a body
// that ends inside the value) falls back to the whole text (decoded()
// false, the decoded part re-encoded: whole 4-character groups decode
// one-to-one), so the JSON parser and base64 decoder report it exactly as
// they would for a body read whole. Not thread-safe (one reader).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "api/json_scan.h"

namespace tensord {

class JsonB64Stream {
 public:
  // The JSON before the value must fit this (a tensor's "dtype" and "shape"
  // take a few dozen bytes).
  static constexpr size_t kHeadBytes = size_t{64} << 10;
  // The value's characters pass through a window this large (in L2).
  static constexpr size_t kWindowBytes = size_t{256} << 10;

  // `length`: the whole body's size (its Content-Length). `out`: an empty
  // string to decode into, resized here (the body pool's: resident pages).
  JsonB64Stream(size_t length, std::string&& out);

  // Where the body's next bytes go: at most room() of them to next(), then
  // commit(n) with how many came. room() is 0 once done().
  char* next();
  size_t room() const;
  void commit(size_t n);
  bool done() const { return received_ == length_; }
  size_t length() const { return length_; }
  size_t received() const { return received_; }

  // Once done(): whether the value was decoded. The JSON text: the body
  // with the value's characters removed ("b64": "") when decoded(), else
  // the whole body.
  bool decoded() const { return phase_ == Phase::kTail; }
  std::string take_json() { return std::move(json_); }
  // decoded(): the string the bytes were decoded into, its first byte at
  // out_offset() (64-byte aligned), out_size() of them.
  std::string take_out() { return std::move(out_); }
  size_t out_offset() const { return out_at_; }
  size_t out_size() const { return out_used_; }

  // The offset just past the opening quote of the top-level object's "b64"
  // string value in `head`; kMore while `head` may yet grow into one, kNever
  // when it cannot (not an object, the key bound to another kind of value,
  // the object closed).
  static constexpr size_t kMore = kJsonMore;
  static constexpr size_t kNever = kJsonAbsent;
  static size_t value_start(std::string_view head);

 private:
  enum class Phase { kHead, kValue, kTail, kWhole };
  void scan_head();
  void enter_value(size_t start);
  void decode_window(bool last);
  // Gives up on decoding: json_ becomes the whole text so far.
  void fall_back();
  // Makes json_ hold every byte still to come after `used` bytes.
  void grow_json(size_t used);

  size_t length_;
  size_t received_ = 0;
  Phase phase_ = Phase::kHead;
  std::string json_;  // kHead: the first bytes; kValue: up to the opening quote; kTail/kWhole: the text
  size_t json_used_ = 0;
  std::string window_;  // kValue: characters not yet decoded
  size_t window_used_ = 0;
  std::string out_;
  size_t out_at_ = 0;
  size_t out_used_ = 0;
};

}  // namespace tensord
