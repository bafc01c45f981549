#include "server/websocket_session.h"

#include <chrono>
#include <utility>
#include <vector>

#include "api/stream_json.h"
#include "ops/error.h"

namespace tensord {
namespace {

constexpr std::chrono::seconds kCloseTimeout{5};
constexpr size_t kMaxMessageBytes = 64 * 1024;

}  // namespace

WebSocketSession::WebSocketSession(tcp::socket&& socket, std::shared_ptr<StreamService> service, StreamViewer viewer)
    : ws_(std::move(socket)),
      service_(std::move(service)),
      viewer_(std::move(viewer)),
      timer_(ws_.get_executor()),
      kill_timer_(ws_.get_executor()) {}

WebSocketSession::~WebSocketSession() = default;

void WebSocketSession::run(http::request<http::string_body> req) {
  ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  ws_.set_option(websocket::stream_base::decorator(
      [](websocket::response_type& res) { res.set(http::field::server, "tensord"); }));
  ws_.read_message_max(kMaxMessageBytes);
  ws_.text(true);
  // The request is kept alive by the handler until the handshake is done.
  auto owned = std::make_shared<http::request<http::string_body>>(std::move(req));
  ws_.async_accept(*owned, [self = shared_from_this(), owned](beast::error_code ec) { self->on_accept(ec); });
}

void WebSocketSession::on_accept(beast::error_code ec) {
  if (ec) return;  // the socket closes with the last reference
  do_read();
}

void WebSocketSession::do_read() {
  ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, std::size_t n) { self->on_read(ec, n); });
}

void WebSocketSession::on_read(beast::error_code ec, std::size_t) {
  if (ec) {
    // Closed by the peer, by us, or the connection is gone: stop everything.
    closed_ = true;
    closing_ = true;
    timer_.cancel();
    kill_timer_.cancel();
    jobs_.reset();
    return;
  }
  std::string text = beast::buffers_to_string(buffer_.data());
  buffer_.consume(buffer_.size());
  if (!closing_) handle_message(text);
  do_read();
}

void WebSocketSession::fail_subscribe(const std::string& message) {
  send(stream_error_to_json(message));
  close_after_writes(websocket::close_code::policy_error, "bad subscribe message");
}

void WebSocketSession::handle_message(const std::string& text) {
  StreamSubscription sub;
  try {
    sub = stream_subscription_from_json(text, kDefaultIntervalMs, kMinIntervalMs, kMaxIntervalMs);
  } catch (const Error& e) {
    return fail_subscribe(e.message());
  }

  // A later subscribe replaces the earlier one.
  interval_ms_ = sub.interval_ms;
  want_metrics_ = sub.metrics;
  if (sub.jobs && !jobs_) {
    std::weak_ptr<WebSocketSession> weak = shared_from_this();
    jobs_ = EventBus::global().subscribe(kMaxQueuedJobEvents, [weak] {
      if (auto self = weak.lock()) {
        auto ex = self->ws_.get_executor();
        net::post(ex, [self = std::move(self)] { self->drain_jobs(); });
      }
    });
  } else if (!sub.jobs) {
    jobs_.reset();
  }

  send(stream_subscribed_to_json(sub));

  timer_.cancel();
  if (want_metrics_) {
    // The first snapshot at once, then one per interval (a fresh timer chain:
    // the cancelled wait sees operation_aborted, or a stale generation).
    ++tick_generation_;
    tick();
  }
}

void WebSocketSession::tick() {
  if (closing_ || !want_metrics_) return;
  send(metrics_snapshot_to_json(service_->metrics_snapshot(viewer_)));
  timer_.expires_after(std::chrono::milliseconds(interval_ms_));
  timer_.async_wait([self = shared_from_this(), gen = tick_generation_](beast::error_code ec) {
    if (ec || gen != self->tick_generation_) return;
    self->tick();
  });
}

void WebSocketSession::drain_jobs() {
  if (!jobs_ || closing_) return;
  bool overflowed = false;
  auto events = jobs_->drain(overflowed);
  if (overflowed) return close_after_writes(websocket::close_code::policy_error, "slow consumer");
  for (const auto& e : events) {
    if (viewer_.see_all || e.tenant == viewer_.tenant) send(job_event_to_json(e));
    if (closing_) return;
  }
}

void WebSocketSession::send(std::string message) {
  if (closing_) return;
  if (queue_.size() >= kMaxQueuedMessages) {
    return close_after_writes(websocket::close_code::policy_error, "slow consumer");
  }
  queue_.push_back(std::move(message));
  if (!writing_) do_write();
}

void WebSocketSession::do_write() {
  writing_ = true;
  ws_.async_write(net::buffer(queue_.front()),
                  [self = shared_from_this()](beast::error_code ec, std::size_t n) { self->on_write(ec, n); });
}

void WebSocketSession::on_write(beast::error_code ec, std::size_t) {
  writing_ = false;
  if (!queue_.empty()) queue_.pop_front();
  if (ec) {
    closed_ = true;
    closing_ = true;
    queue_.clear();
    timer_.cancel();
    kill_timer_.cancel();
    jobs_.reset();
    return;
  }
  if (!queue_.empty()) return do_write();
  if (closing_ && !closed_) do_close();
}

void WebSocketSession::close_after_writes(websocket::close_code code, const std::string& reason) {
  if (closing_) return;
  closing_ = true;
  want_metrics_ = false;
  timer_.cancel();
  jobs_.reset();
  close_reason_ = websocket::close_reason(code, reason);
  if (reason == "slow consumer") {
    // Drop what waits (the write in flight, if any, stays: Beast owns it).
    while (queue_.size() > (writing_ ? 1u : 0u)) queue_.pop_back();
  }
  // A peer that never reads would hold the close forever: cut it off.
  kill_timer_.expires_after(kCloseTimeout);
  kill_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec) return;
    beast::error_code ignored;
    beast::get_lowest_layer(self->ws_).socket().close(ignored);
  });
  if (!writing_) do_close();
}

void WebSocketSession::do_close() {
  closed_ = true;
  ws_.async_close(close_reason_, [self = shared_from_this()](beast::error_code) {
    // The pending read completes with `closed` once the peer answers.
  });
}

}  // namespace tensord
