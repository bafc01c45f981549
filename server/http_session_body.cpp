// HttpSession's reading of a request body (http_session.h): through
// Beast's parser for small bodies and those without a Content-Length; with
// the socket's own reads for large ones, a kInflated route's coded ones and
// a kTensorUpload route's JSON ones, each through a RequestBody
// (request_body.h), which says where a read goes and takes what it
// brought. Tensor bodies (BodyKind::kCharged, kTensorUpload, kInflated) are
// charged to their tenant as read.
#include <algorithm>
#include <utility>

#include "ops/error.h"
#include "server/http_session.h"
#include "server/request_target.h"
#include "server/router.h"
#include "server/server_state.h"

namespace tensord {

void HttpSession::do_read_body() {
  const auto& len = parser_->content_length();
  const bool fits = len && *len <= state_->options.max_body_bytes;
  const bool coded = fits && parser_->get().count(http::field::content_encoding) > 0;
  if (fits && (coded || *len >= kDirectBodyBytes)) {
    const BodyKind kind = route_body_kind();
    if (coded && kind == BodyKind::kInflated) {
      std::optional<ContentCoding> coding;
      try {
        coding = request_coding(std::string(parser_->get()[http::field::content_encoding]));
      } catch (const Error&) {
        // Not a coding we inflate: the body is read as it is and the
        // route answers (400 naming the coding).
      }
      if (coding) return start_body(RequestBody::Mode::kInflate, static_cast<size_t>(*len), kind, coding);
    }
    // A large body of known length is read straight from the socket into
    // its final string, not through Beast's read buffer; a JSON upload's
    // "b64" value decoded as it comes.
    if (*len >= kDirectBodyBytes) {
      const bool b64 = kind == BodyKind::kTensorUpload &&
                       !parser_->get()[http::field::content_type].starts_with("application/vnd.safetensors");
      return start_body(b64 ? RequestBody::Mode::kB64 : RequestBody::Mode::kDirect, static_cast<size_t>(*len), kind);
    }
  }
  read_body_parsed();
}

void HttpSession::read_body_parsed() {
  const auto& len = parser_->content_length();
  // Beast sizes each read by the buffer's free capacity (at least 512
  // bytes, at most 64 KiB): the header read leaves it small, so a large
  // body came in 512-byte pieces, each an async round trip and a timer
  // syscall (a 256 MiB PUT took 3.7 s against 0.17 s on the wire).
  if (len && *len > kBodyBufferBytes && buffer_.capacity() < kBodyBufferBytes) buffer_.reserve(kBodyBufferBytes);
  rearm_body_timer();
  http::async_read_some(*stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t n) {
    self->on_read_body(ec, n);
  });
}

void HttpSession::rearm_body_timer() {
  // header_timeout is the inactivity limit while the body streams in, so a
  // large upload on a slow link is fine and a stalled one is not (moving
  // the deadline is a clock read: IoDeadline).
  deadline_->after(state_->options.header_timeout);
}

BodyKind HttpSession::route_body_kind() {
  const auto& msg = parser_->get();
  early_.reset();
  try {
    EarlyMatch m;
    parse_target(std::string(msg.target()), m.path, m.query);
    m.match = state_->router->match(std::string(msg.method_string()), m.path);
    early_ = std::move(m);
    return early_->match.body_kind();
  } catch (...) {
    return BodyKind::kOther;  // a bad target: handle_request answers it
  }
}

void HttpSession::start_body(RequestBody::Mode mode, size_t len, BodyKind kind, std::optional<ContentCoding> coding) {
  std::shared_ptr<MemoryAccount> account = kind != BodyKind::kOther && who_ ? who_->account : nullptr;
  try {
    body_.emplace(mode, len, state_->bodies, std::move(account), coding, state_->options.max_body_bytes);
    // The body's first bytes may have come in with the header.
    const std::string_view first(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    buffer_.consume(body_->take_first(first));
  } catch (const Error& e) {
    drop_body();
    return reply_and_close(e);
  }
  watch_low_water(true);
  read_body_socket();
}

void HttpSession::read_body_socket() {
  RequestBody& body = *body_;
  if (body.done()) return finish_body();
  set_low_water(body.pace_mark(std::chrono::steady_clock::now(), kLowWaterPace, kLowWaterBytes));
  rearm_body_timer();
  stream_->async_read_some(net::buffer(body.next(), body.room()),
                           [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                             if (ec) {
                               self->drop_body();  // stopped short
                               return self->on_read_error(ec);
                             }
                             try {
                               self->body_->commit(n);
                             } catch (const Error& e) {
                               // Past the tenant's quota, a bomb (413), bytes not in
                               // their coding: answered now, the rest unread, nothing kept.
                               self->drop_body();
                               return self->reply_and_close(e);
                             }
                             self->read_body_socket();
                           });
}

void HttpSession::finish_body() {
  const bool inflated = body_->mode() == RequestBody::Mode::kInflate;
  RequestBody::Finished done;
  try {
    done = body_->finish();
  } catch (const Error& e) {
    drop_body();
    return reply_and_close(e);
  }
  body_.reset();
  watch_low_water(false);
  set_low_water(1);
  auto& msg = parser_->get();
  // The body the route sees is the inflated one, as if sent without a
  // coding (as a decoding proxy would hand it on).
  if (inflated) msg.erase(http::field::content_encoding);
  msg.body() = std::move(done.body);
  decoded_b64_ = std::move(done.decoded);
  streamed_bytes_ = done.length;
  body_charge_ = std::move(done.charge);
  handle_request();
}

void HttpSession::set_low_water(int want) {
  // The reader wakes once this much has come (or the peer closed), not for
  // every segment: a large body read on loopback spent 26% of the server's
  // time in wake-ups and context switches. The mark is what the client sent
  // in the last kLowWaterPace at the pace of the last read
  // (RequestBody::pace_mark), so a slow client still wakes the reader often
  // and its progress re-arms the body timer; at most kLowWaterBytes and
  // what is left (the body's last bytes must wake it); 1, the default, for
  // a body's first read and again between requests.
  if (want == low_water_) return;
  beast::error_code ec;
  stream_->socket().set_option(net::socket_base::receive_low_watermark(want), ec);
  if (!ec) low_water_ = want;
}

void HttpSession::watch_low_water(bool on) {
  // A client that slows down after a fast start would leave the reader
  // waiting for a mark set at the fast pace (and its body timer would close
  // a connection that is still moving): a read that has not completed for
  // kLowWaterWatch gets a mark of 1, so whatever has come wakes it. One
  // timer for the whole body, not one per read (a timer syscall per read
  // cost 19% before, see rearm_body_timer). Watched while body_ is read.
  if (!on) {
    if (low_water_timer_) low_water_timer_->cancel();
    return;
  }
  if (!low_water_timer_ || low_water_timer_->get_executor() != stream_->get_executor()) {
    low_water_timer_.emplace(stream_->get_executor());
  }
  low_water_timer_->expires_after(kLowWaterWatch);
  low_water_timer_->async_wait([self = shared_from_this(), seen = body_->reads()](beast::error_code ec) {
    if (ec || !self->body_) return;
    if (self->body_->reads() == seen && self->low_water_ > 1) {
      beast::error_code sec;
      self->stream_->socket().set_option(net::socket_base::receive_low_watermark(1), sec);
      if (!sec) self->low_water_ = 1;
    }
    self->watch_low_water(true);
  });
}

void HttpSession::drop_body() {
  watch_low_water(false);
  body_.reset();  // its buffers back to the pool, its charge released (~RequestBody)
}

void HttpSession::on_read_body(beast::error_code ec, std::size_t) {
  if (ec) return on_read_error(ec);
  if (parser_->is_done()) return handle_request();
  read_body_parsed();
}

}  // namespace tensord
