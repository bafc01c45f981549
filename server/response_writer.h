// One HTTP/1.1 response as it leaves: the head (status line and header
// fields, formatted here into one string the session keeps from response to
// response) and the body (a string, then views of memory it does not own:
// tensors' bytes, each kept alive by its owner until the response is
// cleared). The session asks for the next buffers, writes what the socket
// takes and reports it back; a small answer is one sendmsg with no
// asynchronous operation (HttpSession::do_write). No Beast: the bytes are
// checked in the unit tests against what a parser reads back.
//
// A view made as it is sent (BodyView::fill: a tensor's base64) is made a
// scratch buffer at a time and handed out alone, after what came before it.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/http_types.h"

namespace tensord {

class ResponseWriter {
 public:
  static constexpr size_t kScratchBytes = size_t{512} << 10;  // a multiple of BodyView::kFillAlign
  static_assert(kScratchBytes % BodyView::kFillAlign == 0);

  // The status line ("HTTP/1.1 200 OK"); starts a new response (the last
  // one must have been cleared). `version` is 10 or 11.
  void begin(unsigned version, int status, std::string_view reason);
  // One header field, as given (the caller checked name and value).
  void field(std::string_view name, std::string_view value);
  void content_length(uint64_t n);
  // Ends the head: "Connection: close" when an HTTP/1.1 connection ends,
  // "Connection: keep-alive" when an HTTP/1.0 one stays (RFC 9112 9.3).
  void end_head(bool keep_alive);
  // What follows the head (none for HEAD, 204 and 304).
  void body(std::string text, std::vector<BodyView> views);

  // The next buffers to send, at most `max` of them (>= 1); 0 once all is
  // sent. They stay valid until consume() or clear().
  size_t next(iovec* out, size_t max);
  // `n` bytes of what next() gave went out.
  void consume(size_t n);
  bool done() const { return part_ >= parts(); }
  // Drops the body (the views' owners go) and keeps the head's capacity.
  void clear();

 private:
  size_t parts() const { return 2 + views_.size(); }  // head_, body_, then views_
  // Part k's bytes when it is plain memory; false for a fill view.
  bool plain(size_t k, const char*& data, size_t& size) const;

  std::string head_;
  unsigned version_ = 11;
  std::string body_;
  std::vector<BodyView> views_;
  size_t part_ = 0;  // the part being sent
  size_t off_ = 0;   // bytes of it sent (of a fill view: where scratch_ starts)
  // A fill view's bytes [off_, off_ + scratch_len_), scratch_at_ of them sent.
  std::string scratch_;
  size_t scratch_len_ = 0;
  size_t scratch_at_ = 0;
};

}  // namespace tensord
