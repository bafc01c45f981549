// HttpSession's reading of a request body (http_session.h): through
// Beast's parser for small bodies and those without a Content-Length; with
// the socket's own reads into the final string for large ones; and, for a
// route that asks (BodyKind::kTensorUpload), through a JsonB64Stream that
// decodes the body's "b64" value as it arrives; for a kInflated route, a
// gzip or deflate body through a StreamInflater as it arrives. Tensor bodies
// (BodyKind::kCharged, kTensorUpload, kInflated) are charged to their
// tenant as read.
#include <algorithm>
#include <utility>

#include "ops/error.h"
#include "ops/memory_account.h"
#include "server/body_pool.h"
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
      if (coding) return start_body_inflate(*coding, static_cast<size_t>(*len), kind);
    }
    // A large body of known length is read straight from the socket into
    // its final string (read_body_direct), not through Beast's read buffer.
    if (*len >= kDirectBodyBytes) return start_body_direct(static_cast<size_t>(*len), kind);
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
  // large upload on a slow link is fine and a stalled one is not. Re-armed
  // at most every kTimerRearm (a timerfd syscall per piece cost 19%).
  const auto now = std::chrono::steady_clock::now();
  if (now - body_timer_armed_ >= kTimerRearm) {
    stream_->expires_after(state_->options.header_timeout);
    body_timer_armed_ = now;
  }
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

void HttpSession::start_body_direct(size_t len, BodyKind kind) {
  last_read_ = 0;
  watch_low_water(true);
  const auto& msg = parser_->get();
  const bool upload = kind == BodyKind::kTensorUpload;
  body_charged_ = 0;
  body_account_ = kind != BodyKind::kOther && who_ ? who_->account : nullptr;
  const bool safetensors = msg[http::field::content_type].starts_with("application/vnd.safetensors");
  // The string comes from the body pool: a released body's, its pages
  // already resident, when one fits; else fresh and advised huge pages
  // (one fault per 2 MiB, body_pool.h). Beast would read the body into its
  // own buffer first and copy it from there, 64 KiB at a time.
  if (upload && !safetensors) {
    // The decoded bytes need 3/4 of the body.
    b64_stream_.emplace(len, state_->bodies->take(len / 4 * 3 + 128));
    // The body's first bytes may have come in with the header.
    while (buffer_.size() > 0 && b64_stream_->room() > 0) {
      const size_t n = net::buffer_copy(net::buffer(b64_stream_->next(), b64_stream_->room()), buffer_.data());
      buffer_.consume(n);
      b64_stream_->commit(n);
    }
    return read_body_stream();
  }
  direct_body_ = state_->bodies->take_sized(len);  // every byte is read into before it is used
  const size_t have = std::min(buffer_.size(), len);
  net::buffer_copy(net::buffer(direct_body_.data(), have), buffer_.data());
  buffer_.consume(have);
  direct_got_ = have;
  read_body_direct();
}

void HttpSession::start_body_inflate(ContentCoding coding, size_t len, BodyKind kind) {
  last_read_ = 0;
  watch_low_water(true);
  body_charged_ = 0;
  body_account_ = kind != BodyKind::kOther && who_ ? who_->account : nullptr;
  inflate_left_ = len;
  inflate_in_.resize(std::min(len, kInflateReadBytes));
  // The inflated bytes are charged (and checked against the limit) before
  // they are held; the compressed ones pass through inflate_in_.
  inflater_ = std::make_unique<StreamInflater>(coding, state_->options.max_body_bytes, len * 4,
                                               [this](size_t total) { charge_to(total); });
  // The body's first bytes may have come in with the header.
  const size_t have = std::min(buffer_.size(), len);
  const std::string_view first(static_cast<const char*>(buffer_.data().data()), have);
  const bool ok = inflate_piece(first);
  buffer_.consume(have);
  if (!ok) return;
  inflate_left_ -= have;
  read_body_inflate();
}

bool HttpSession::inflate_piece(std::string_view in) {
  try {
    inflater_->feed(in);
    return true;
  } catch (const Error& e) {
    // A bomb (413), a body that is not in its coding (400) or one past the
    // tenant's quota (429): answered now, the rest unread, nothing kept.
    drop_body();
    reply_and_close(e.code() == ErrorCode::kQuotaExceeded
                        ? Error(e.code(), e.message() + " (a compressed body counts as it inflates)")
                        : e);
    return false;
  }
}

void HttpSession::read_body_inflate() {
  if (inflate_left_ == 0) {
    std::string body;
    try {
      body = inflater_->finish();
    } catch (const Error& e) {
      drop_body();
      return reply_and_close(e);
    }
    inflater_.reset();
    inflate_in_ = {};
    end_body_read();
    // The body the route sees is the inflated one, as if sent without a
    // coding (as a decoding proxy would hand it on).
    auto& msg = parser_->get();
    msg.erase(http::field::content_encoding);
    msg.body() = std::move(body);
    return handle_request();
  }
  const size_t want = std::min(inflate_in_.size(), inflate_left_);
  set_low_water(want);
  rearm_body_timer();
  stream_->async_read_some(net::buffer(inflate_in_.data(), want),
                           [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                             if (ec) {
                               self->drop_body();  // stopped short
                               return self->on_read_error(ec);
                             }
                             self->inflate_left_ -= n;
                             self->last_read_ = n;
                             ++self->body_reads_;
                             if (!self->inflate_piece(std::string_view(self->inflate_in_.data(), n))) return;
                             self->read_body_inflate();
                           });
}

void HttpSession::set_low_water(size_t left) {
  // The reader wakes once this much has come (or the peer closed), not for
  // every segment: a large body read on loopback spent 26% of the server's
  // time in wake-ups and context switches. The mark is what the client sent
  // in the last kLowWaterPace at the pace of the last read, so a slow
  // client still wakes the reader often and its progress re-arms the body
  // timer; at most kLowWaterBytes and what is left (the body's last bytes
  // must wake it); 1, the default, for a body's first read and again
  // between requests.
  const auto now = std::chrono::steady_clock::now();
  const auto took = std::chrono::duration_cast<std::chrono::microseconds>(now - last_read_at_).count();
  last_read_at_ = now;
  const size_t pace = last_read_ == 0 ? 1
                                      : static_cast<size_t>(static_cast<double>(last_read_) *
                                                            static_cast<double>(kLowWaterPace.count()) /
                                                            static_cast<double>(std::max<int64_t>(took, 1)));
  const int want = static_cast<int>(std::max<size_t>(std::min({kLowWaterBytes, left, pace}), 1));
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
  // cost 19% before, see rearm_body_timer).
  watching_body_ = on;
  if (!on) {
    if (low_water_timer_) low_water_timer_->cancel();
    return;
  }
  if (!low_water_timer_ || low_water_timer_->get_executor() != stream_->get_executor()) {
    low_water_timer_.emplace(stream_->get_executor());
  }
  low_water_timer_->expires_after(kLowWaterWatch);
  low_water_timer_->async_wait([self = shared_from_this(), seen = body_reads_](beast::error_code ec) {
    if (ec || !self->watching_body_) return;
    if (self->body_reads_ == seen && self->low_water_ > 1) {
      beast::error_code sec;
      self->stream_->socket().set_option(net::socket_base::receive_low_watermark(1), sec);
      if (!sec) self->low_water_ = 1;
    }
    self->watch_low_water(true);
  });
}

void HttpSession::charge_to(size_t held) {
  if (!body_account_ || held == body_charged_) return;
  if (held < body_charged_) {
    body_account_->release(static_cast<int64_t>(body_charged_ - held));
  } else {
    body_account_->charge(static_cast<int64_t>(held - body_charged_));  // throws quota_exceeded: nothing charged
  }
  body_charged_ = held;
}

bool HttpSession::charge_body(size_t held, bool last) {
  if (!body_account_ || held <= body_charged_ || (!last && held - body_charged_ < kChargeStep)) return true;
  try {
    charge_to(held);
    return true;
  } catch (const Error& e) {
    // Past the tenant's quota: answered now, the rest of the body unread.
    drop_body();
    reply_and_close(Error(e.code(), e.message() + " (an upload counts as its body arrives)"));
    return false;
  }
}

void HttpSession::release_body_charge() {
  if (body_account_ && body_charged_ > 0) body_account_->release(static_cast<int64_t>(body_charged_));
  body_account_.reset();
  body_charged_ = 0;
}

void HttpSession::end_body_read() {
  watch_low_water(false);
  set_low_water(1);
  if (body_account_ && body_charged_ > 0) {
    body_charge_ = std::shared_ptr<void>(
        nullptr, [account = body_account_, n = static_cast<int64_t>(body_charged_)](void*) { account->release(n); });
  }
  body_account_.reset();
  body_charged_ = 0;
}

void HttpSession::drop_body() {
  watch_low_water(false);
  release_body_charge();
  // What it held goes back for the next upload.
  if (b64_stream_) {
    state_->bodies->recycle(b64_stream_->take_out());
    state_->bodies->recycle(b64_stream_->take_json());
    b64_stream_.reset();
  }
  if (direct_body_.capacity() > 0) state_->bodies->recycle(std::move(direct_body_));
  direct_body_ = {};
  inflater_.reset();
  inflate_in_ = {};
}

void HttpSession::read_body_direct() {
  const bool done = direct_got_ == direct_body_.size();
  if (!charge_body(direct_got_, done)) return;
  if (done) {
    end_body_read();
    parser_->get().body() = std::move(direct_body_);
    direct_body_ = {};
    return handle_request();
  }
  set_low_water(direct_body_.size() - direct_got_);
  rearm_body_timer();
  stream_->async_read_some(net::buffer(direct_body_.data() + direct_got_, direct_body_.size() - direct_got_),
                           [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                             if (ec) {
                               self->drop_body();  // stopped short
                               return self->on_read_error(ec);
                             }
                             self->direct_got_ += n;
                             self->last_read_ = n;
                             ++self->body_reads_;
                             self->read_body_direct();
                           });
}

void HttpSession::read_body_stream() {
  JsonB64Stream& in = *b64_stream_;
  if (!charge_body(in.out_size(), in.done())) return;
  if (in.done()) {
    end_body_read();
    parser_->get().body() = in.take_json();
    streamed_bytes_ = in.length();
    if (in.decoded()) {
      decoded_b64_.emplace();
      decoded_b64_->offset = in.out_offset();
      decoded_b64_->size = in.out_size();
      decoded_b64_->bytes = in.take_out();
    } else {
      state_->bodies->recycle(in.take_out());
    }
    b64_stream_.reset();
    return handle_request();
  }
  set_low_water(std::min(in.room(), in.length() - in.received()));
  rearm_body_timer();
  stream_->async_read_some(net::buffer(in.next(), in.room()),
                           [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                             if (ec) {
                               self->drop_body();  // stopped short
                               return self->on_read_error(ec);
                             }
                             self->b64_stream_->commit(n);
                             self->last_read_ = n;
                             ++self->body_reads_;
                             self->read_body_stream();
                           });
}

void HttpSession::on_read_body(beast::error_code ec, std::size_t) {
  if (ec) return on_read_error(ec);
  if (parser_->is_done()) return handle_request();
  read_body_parsed();
}

}  // namespace tensord
