#include "server/http_session.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <utility>

#include "api/error_reply.h"
#include "ops/error.h"
#include "server/async_session_reply.h"
#include "server/error_policy.h"
#include "server/http_metrics.h"
#include "server/request_id.h"
#include "server/request_target.h"
#include "server/router.h"
#include "server/server_state.h"
#include "scheduler/tenant_registry.h"
#include "server/stream_service.h"
#include "server/websocket_session.h"
#include "metrics/log.h"
#include "metrics/trace_buffer.h"
#include "metrics/trace_request_scope.h"

namespace tensord {
namespace {

constexpr std::chrono::seconds kLingerTime{2};
constexpr std::size_t kLingerMaxBytes = 8 << 20;

bool is_token_char(char c) {
  if (c >= 'a' && c <= 'z') return true;
  if (c >= 'A' && c <= 'Z') return true;
  if (c >= '0' && c <= '9') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool valid_header(const std::string& name, const std::string& value) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!is_token_char(c)) return false;
  }
  for (char c : value) {
    if (c == '\r' || c == '\n' || c == '\0') return false;
  }
  return true;
}

std::string_view field_value(const http::request<http::string_body>& msg, std::string_view name) {
  auto it = msg.find(name);
  if (it == msg.end()) return {};
  return {it->value().data(), it->value().size()};
}

// Errors of the HTTP parser (as opposed to the network or a timeout).
bool is_http_error(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_target).category();
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

HttpSession::HttpSession(tcp::socket&& socket, std::shared_ptr<ServerState> state) : state_(std::move(state)) {
  stream_.emplace(std::move(socket));
}

HttpSession::~HttpSession() {
  end_request();
}

void HttpSession::run() {
  make_deadline();
  // Start on the session's strand (the socket's executor).
  net::dispatch(stream_->get_executor(), [self = shared_from_this()] { self->do_read_header(); });
}

void HttpSession::make_deadline() {
  // The deadline cancels what the socket has pending: its handler then
  // closes (on_read_error, on_write, on_linger), as for a peer gone.
  deadline_.emplace(stream_->get_executor(), [weak = weak_from_this()] {
    if (auto self = weak.lock()) {
      beast::error_code ec;
      self->stream_->socket().cancel(ec);
    }
  });
}

void HttpSession::begin_request() {
  if (in_flight_) return;
  in_flight_ = true;
  state_->inflight.fetch_add(1);
  start_ = std::chrono::steady_clock::now();
}

void HttpSession::end_request() {
  if (in_flight_) {
    in_flight_ = false;
    state_->inflight.fetch_sub(1);
  }
}

void HttpSession::do_read_header() {
  // A fresh parser per message: limits and state never leak across requests.
  parser_.emplace();
  if (buffer_.size() == 0 && buffer_.capacity() > kBodyBufferBytes / 4) buffer_.shrink_to_fit();  // idle: give it back
  parser_->body_limit(state_->options.max_body_bytes);
  parser_->header_limit(static_cast<std::uint32_t>(state_->options.max_header_bytes));
  request_id_.clear();
  route_.clear();
  method_.clear();
  caller_.reset();
  bytes_in_ = 0;
  version_ = 11;
  // The first request must arrive within header_timeout; later ones on a
  // kept-alive connection within idle_timeout.
  deadline_->after(first_request_ ? state_->options.header_timeout : state_->options.idle_timeout);
  http::async_read_header(
      *stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t n) { self->on_read_header(ec, n); });
}

void HttpSession::on_read_header(beast::error_code ec, std::size_t) {
  if (ec) return on_read_error(ec);
  first_request_ = false;
  begin_request();
  early_.reset();  // a route matched for an earlier request's body is not this one's
  const auto& msg = parser_->get();
  method_ = std::string(msg.method_string());
  version_ = msg.version() == 10 ? 10 : 11;
  request_id_ = request_id_for(field_value(msg, "x-request-id"));

  if (state_->draining.load()) {
    return reply_and_close(Error(ErrorCode::kUnavailable, "server is draining for shutdown"));
  }
  // Who sent it: one token lookup for the lane, the body's charge and the
  // route (server/caller.h).
  who_ = caller_for(field_value(msg, "authorization"));
  if (state_->lane_pool && who_ && move_to_lane(who_->lane)) return;
  after_header();
}

std::shared_ptr<const Caller> HttpSession::caller_for(std::string_view authorization) {
  if (!state_->resolve) return nullptr;
  // A keep-alive client sends the same token every time: its caller is
  // kept while the tenants are the same (a reload moves the generation).
  // Constant time: behind a proxy one connection carries many tenants.
  const bool keep = static_cast<bool>(state_->callers_generation);
  const uint64_t gen = keep ? state_->callers_generation() : 0;
  if (keep && last_caller_ && gen == last_caller_generation_ &&
      constant_time_equal(authorization, last_authorization_)) {
    return last_caller_;
  }
  last_caller_ = state_->resolve(authorization);
  last_authorization_.assign(authorization);
  last_caller_generation_ = gen;
  return last_caller_;
}

bool HttpSession::move_to_lane(const std::string& lane_name) {
  boost::asio::thread_pool* lane = state_->lane_pool(lane_name);
  if (lane == nullptr || lane == lane_) return false;
  // The socket's descriptor leaves its reactor registration and joins the
  // lane's: from here its reads, writes and completions run on the lane's
  // threads, pinned to the tenant's cores (a heavy tenant's body copies no
  // longer take the io threads other tenants' requests need).
  beast::error_code ec;
  const tcp::endpoint local = stream_->socket().local_endpoint(ec);
  if (ec) return false;  // the peer is gone: the read that follows finds out
  const auto fd = stream_->socket().release(ec);
  if (ec) return false;
  tcp::socket moved(net::make_strand(lane->get_executor()));
  moved.assign(local.protocol(), fd, ec);
  if (ec) {
    ::close(fd);
    do_close(false);  // nothing is pending: the session ends with this handler
    return true;
  }
  stream_.emplace(std::move(moved));
  make_deadline();  // its timer on the lane's strand
  lane_ = lane;
  net::dispatch(stream_->get_executor(), [self = shared_from_this()] { self->after_header(); });
  return true;
}

void HttpSession::after_header() {
  const auto& msg = parser_->get();
  if (parser_->is_done()) return handle_request();

  // Clients that ask (curl does for large bodies) wait for 100 Continue
  // before sending the body; the limits were checked with the headers.
  auto expect = msg.find(http::field::expect);
  if (expect != msg.end() && iequals(expect->value(), "100-continue") && msg.version() >= 11) {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    deadline_->after(state_->options.header_timeout);
    net::async_write(
        *stream_, net::buffer(kContinue.data(), kContinue.size()),
        [self = shared_from_this()](beast::error_code wec, std::size_t n) { self->on_continue_sent(wec, n); });
    return;
  }
  do_read_body();
}

void HttpSession::on_continue_sent(beast::error_code ec, std::size_t) {
  if (ec) return do_close(false);
  do_read_body();
}

void HttpSession::on_read_error(beast::error_code ec) {
  if (ec == http::error::body_limit) {
    if (request_id_.empty()) {
      request_id_ = request_id_for(field_value(parser_->get(), "x-request-id"));
      method_ = std::string(parser_->get().method_string());
    }
    begin_request();
    return reply_and_close(
        Error(ErrorCode::kPayloadTooLarge,
              "request body exceeds the limit of " + std::to_string(state_->options.max_body_bytes) + " bytes"));
  }
  if (ec == http::error::header_limit) {
    begin_request();
    if (request_id_.empty()) request_id_ = new_request_id();
    return reply_and_close(
        Error(ErrorCode::kBadRequest,
              "request headers exceed " + std::to_string(state_->options.max_header_bytes) + " bytes"));
  }
  // A peer that goes away or stays silent just loses its connection.
  if (ec == http::error::end_of_stream || ec == http::error::partial_message || !is_http_error(ec)) {
    return do_close(false);
  }
  // Anything else from the HTTP parser: the bytes are not HTTP/1.1.
  begin_request();
  if (request_id_.empty()) request_id_ = new_request_id();
  reply_and_close(Error(ErrorCode::kBadRequest, "malformed HTTP request: " + ec.message()));
}

void HttpSession::reply_and_close(const Error& e) {
  linger_ = true;
  // A /v2 request answers KServe's error shape even before it was routed.
  ErrorStyle style = parser_ ? error_style_for(std::string_view(parser_->get().target())) : ErrorStyle::kTensord;
  send(safe_error_reply(e, request_id_, style), method_ == "HEAD", false);
}

void HttpSession::handle_request() {
  auto msg = parser_->release();
  HttpRequest req;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  for (const auto& field : msg) {
    auto name = lower(field.name_string());
    auto [it, inserted] = req.headers.emplace(name, std::string(field.value()));
    if (!inserted) {
      it->second += ", ";  // repeated field: combined per RFC 9110 5.3
      it->second += field.value();
    }
  }
  req.body = std::move(msg.body());
  req.recycler = state_->bodies;
  req.request_id = request_id_;
  req.who = std::move(who_);
  caller_ = req.caller;
  req.decoded_b64 = std::move(decoded_b64_);
  decoded_b64_.reset();
  req.body_charge = std::move(body_charge_);
  bytes_in_ = req.decoded_b64 ? streamed_bytes_ : req.body.size();

  const bool client_keep_alive = msg.keep_alive();
  // The route, matched once (for a large body, when its headers came:
  // route_body_kind); a bad target matches nothing and call_handler
  // answers it.
  std::optional<RouteMatch> match;
  if (early_) {
    req.path = std::move(early_->path);
    req.query = std::move(early_->query);
    match = std::move(early_->match);
    early_.reset();
  } else {
    try {
      parse_target(req.target, req.path, req.query);
      match = state_->router->match(req.method, req.path);
    } catch (...) {
      req.path.clear();
    }
  }
  if (match && match->upgrades() && state_->streams && websocket::is_upgrade(msg)) {
    return upgrade(std::move(msg), req, match->route());
  }
  if (match && match->dispatch() == Dispatch::kAsync) {
    return handle_async(std::move(req), std::move(*match), client_keep_alive);
  }
  HttpResponse out = call_handler(req, match ? &*match : nullptr);
  route_ = req.route;
  bool keep_alive = client_keep_alive && !state_->draining.load();
  send(std::move(out), req.method == "HEAD", keep_alive);
}

void HttpSession::watch_disconnect() {
  // A pipelined next request already buffered: the client is still there.
  if (buffer_.size() > 0) return;
  watching_ = true;
  watch_wanted_ = true;
  stream_->socket().async_wait(
      tcp::socket::wait_read,
      net::bind_executor(stream_->get_executor(), [self = shared_from_this()](beast::error_code ec) {
        self->watching_ = false;
        if (ec || !self->watch_wanted_) return;  // cancelled: the handler finished first
        // Readiness alone proves nothing: an edge left over from the request's
        // own segments can wake this wait with nothing to read. Peek: 0 bytes
        // is the peer's FIN, an error other than EAGAIN a reset; no data yet
        // means watch again; data is a pipelined request (the client is there).
        char byte;
        ssize_t n = ::recv(self->stream_->socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          if (auto reply = self->pending_reply_.lock()) reply->client_gone();
        } else if (n < 0) {
          self->watch_disconnect();
        }
      }));
}

void HttpSession::stop_watching() {
  watch_wanted_ = false;
  if (!watching_) return;
  beast::error_code ec;
  stream_->socket().cancel(ec);
}

void HttpSession::upgrade(http::request<http::string_body>&& msg, HttpRequest& req, const std::string& route) {
  req.route = route;
  route_ = req.route;
  StreamViewer viewer;
  try {
    viewer = state_->streams->authenticate(req);
  } catch (const Error& e) {
    return send(safe_error_reply(e, req.request_id), false, false);
  }
  if (state_->metrics != nullptr) {
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    state_->metrics->record(route_, method_, 101, seconds);
  }
  end_request();  // a stream is not a request in flight: drain does not wait for it
  deadline_->never();
  std::make_shared<WebSocketSession>(stream_->release_socket(), state_->streams, std::move(viewer))
      ->run(std::move(msg));
}

HttpResponse HttpSession::call_handler(HttpRequest& req, RouteMatch* match) {
  if (match != nullptr) req.route = match->route();
  TraceRequestScope trace_scope(req.method, req.route, req.request_id);  // the request's span in /v1/trace
  return guarded(
      [&] {
        if (match == nullptr) {
          parse_target(req.target, req.path, req.query);  // throws: the target was bad
          throw Error(ErrorCode::kInternal, "a request without a route match");
        }
        return match->call(req);
      },
      req.request_id, req.method, req.route, error_style_for(req.path.empty() ? req.target : req.path));
}

void HttpSession::handle_async(HttpRequest&& req, RouteMatch&& match, bool client_keep_alive) {
  const std::string lane = req.who ? req.who->lane : std::string();
  auto reply = std::make_shared<AsyncSessionReply>(shared_from_this(), req.method, match.route(), req.request_id,
                                                   req.method == "HEAD", client_keep_alive, lane);
  pending_reply_ = reply;
  // No read or write is pending until the answer: a job may take longer
  // than any I/O timeout, so the stream's timer is off until send(); and
  // the client going away is watched for meanwhile.
  auto await_answer = [this] {
    deadline_->never();
    watch_disconnect();
  };
  // A small body is parsed and its job queued right here; a larger one
  // (JSON tensors to decode, a program to compile) on the tenant's lane
  // (or the handler pool), away from the io threads.
  if (req.body.size() <= match.inline_body_bytes() || !state_->offload_as) {
    reply->start(req, match);
    // A short job may have run and been answered already
    // (JobScheduler::submit_or_run): then there is nothing to await.
    if (!pending_reply_.expired()) await_answer();
  } else {
    await_answer();
    state_->offload_as(lane,  // decoded on the tenant's lane
                       [reply, req = std::move(req), match = std::move(match)]() mutable { reply->start(req, match); });
  }
}

void HttpSession::dispatch(std::function<void()> f) {
  net::dispatch(stream_->get_executor(), std::move(f));
}

void HttpSession::offload(std::string_view lane, std::function<void()> f) {
  if (state_->offload_as) return state_->offload_as(lane, std::move(f));
  net::post(stream_->get_executor(), std::move(f));
}

void HttpSession::answer(HttpResponse&& out, const std::string& route, bool head, bool keep_alive) {
  route_ = route;
  stop_watching();
  pending_reply_.reset();
  send(std::move(out), head, keep_alive && !state_->draining.load());
}

void HttpSession::send(HttpResponse&& out, bool head, bool keep_alive) {
  int status = out.status;
  if (status < 200 || status > 999) {
    log::error("internal error: a handler returned a bad status", {{"request_id", request_id_}, {"status", status}});
    out = safe_error_reply(Error(ErrorCode::kInternal, "internal error"), request_id_);
    status = out.status;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (state_->metrics != nullptr) state_->metrics->record(route_, method_, status, seconds);
  if (log::enabled(log::Level::kInfo)) {
    log::info("request", {{"request_id", request_id_},
                          {"tenant", caller_ ? *caller_ : std::string()},
                          {"method", method_},
                          {"route", route_.empty() ? std::string("unmatched") : route_},
                          {"status", status},
                          {"duration_ms", seconds * 1e3},
                          {"bytes_in", bytes_in_},
                          {"bytes_out", head ? size_t{0} : out.body_size()}});
  }

  // Beast's obsolete_reason: the phrase for a status it knows, else
  // "<unknown-status>"; 499 is nginx's.
  writer_.begin(version_, status,
                status == 499
                    ? std::string_view("Client Closed Request")
                    : std::string_view(http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)))));
  writer_.field("Server", "tensord");
  writer_.field("X-Request-Id", request_id_);
  {
    // The request's whole server-side time, from its headers read to this
    // response (body read, parse, compile, queue, run, encode): the log
    // line's duration_ms, taken once above. bench/graphs.py compares
    // /v1/run with a graph replay by it.
    char timing[48] = "total;dur=";
    const double ms = seconds * 1e3;
    const auto r = std::to_chars(timing + 10, timing + sizeof timing, ms, std::chars_format::fixed, 3);
    writer_.field("Server-Timing", std::string_view(timing, static_cast<size_t>(r.ptr - timing)));
  }
  const bool no_body_status = status == 204 || status == 304;
  const bool typed = out.body_size() != 0 && !out.content_type.empty() && !no_body_status;
  bool has_length = false;
  for (const auto& [name, value] : out.headers) {
    if (!valid_header(name, value)) {
      log::error("dropped an invalid response header", {{"request_id", request_id_}, {"header", name}});
      continue;
    }
    if (iequals(name, "content-length")) {
      if (!head) continue;  // computed below from the body
      has_length = true;
    }
    if (iequals(name, "connection") || iequals(name, "transfer-encoding") || iequals(name, "server") ||
        iequals(name, "x-request-id") || (typed && iequals(name, "content-type"))) {
      continue;  // owned by the session (a body's type: out.content_type)
    }
    writer_.field(name, value);
  }
  if (typed) writer_.field("Content-Type", out.content_type);
  if (head) {
    // HEAD: the headers a GET would carry, no body.
    if (!has_length && out.body_size() != 0 && !no_body_status) writer_.content_length(out.body_size());
  } else if (!no_body_status) {
    writer_.content_length(out.body_size());
  }
  writer_.end_head(keep_alive);
  if (!head && !no_body_status) writer_.body(std::move(out.body), std::move(out.views));
  close_after_write_ = !keep_alive;
  do_write();
}

void HttpSession::do_write() {
  // What the socket takes now goes at once (a small answer: one sendmsg,
  // no asynchronous operation, no timer); the rest when it can take more.
  // Past kWriteAtOnceBytes in one go a large answer continues through the
  // event loop, a chunk per completion, so the other connections of this
  // thread are served between its chunks (a fast reader of a large base64
  // answer would otherwise hold the thread until the last byte).
  constexpr size_t kMaxBuffers = 64;
  constexpr size_t kWriteAtOnceBytes = size_t{256} << 10;
  std::array<iovec, kMaxBuffers> iov{};
  const int fd = stream_->socket().native_handle();
  size_t written = 0;
  size_t n = 0;
  for (;;) {
    n = writer_.next(iov.data(), iov.size());
    if (n == 0) return on_written();
    if (written >= kWriteAtOnceBytes) break;
    msghdr m{};
    m.msg_iov = iov.data();
    m.msg_iovlen = n;
    const ssize_t sent = ::sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent > 0) {
      writer_.consume(static_cast<size_t>(sent));
      written += static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      writer_.clear();
      return do_close(false);
    }
    break;
  }
  // Inactivity limit per chunk, as for request bodies. iov still holds what
  // the last next() gave: nothing of it went.
  out_buffers_.clear();
  for (size_t i = 0; i < n; ++i) out_buffers_.emplace_back(iov[i].iov_base, iov[i].iov_len);
  deadline_->after(state_->options.header_timeout);
  stream_->async_write_some(out_buffers_, [self = shared_from_this()](beast::error_code ec, std::size_t bytes) {
    self->on_write(ec, bytes);
  });
}

void HttpSession::on_write(beast::error_code ec, std::size_t bytes) {
  if (ec) {
    writer_.clear();
    return do_close(false);
  }
  writer_.consume(bytes);
  do_write();
}

void HttpSession::on_written() {
  writer_.clear();
  end_request();
  if (close_after_write_) return do_close(linger_);
  do_read_header();
}

void HttpSession::do_close(bool linger) {
  end_request();
  beast::error_code ec;
  stream_->socket().shutdown(tcp::socket::shutdown_send, ec);
  if (!linger || ec) return;  // the last handler's ref goes: the socket closes
  discard_ = std::make_unique<std::array<char, 16 * 1024>>();
  deadline_->after(kLingerTime);
  stream_->async_read_some(net::buffer(*discard_), [self = shared_from_this()](beast::error_code rec, std::size_t n) {
    self->on_linger(rec, n);
  });
}

void HttpSession::on_linger(beast::error_code ec, std::size_t bytes) {
  lingered_bytes_ += bytes;
  if (ec || lingered_bytes_ > kLingerMaxBytes) return;  // done: the socket closes
  stream_->async_read_some(net::buffer(*discard_), [self = shared_from_this()](beast::error_code rec, std::size_t n) {
    self->on_linger(rec, n);
  });
}

}  // namespace tensord
