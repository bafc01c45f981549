// One GET /v1/stream WebSocket (Beast chat-multi's websocket_session): the
// HTTP session authenticates and hands over the socket and the upgrade
// request. The client subscribes with {"subscribe": [...], "interval_ms": N};
// the session pushes metrics snapshots on a timer and job events from the
// EventBus. Writes go through a bounded queue with one write in flight; a
// consumer that falls behind is closed with 1008 (policy violation) instead
// of being buffered forever. Everything runs on the connection's strand.
// Included by server/*.cpp only.
#pragma once

#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>

#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "metrics/event_bus.h"
#include "server/beast.h"
#include "server/stream_service.h"

namespace tensord {

namespace websocket = boost::beast::websocket;

class WebSocketSession : public std::enable_shared_from_this<WebSocketSession> {
 public:
  static constexpr size_t kMaxQueuedMessages = 1024;   // writes waiting; more: the consumer is too slow
  static constexpr size_t kMaxQueuedJobEvents = 4096;  // EventBus queue of this connection
  static constexpr int kMinIntervalMs = 100, kMaxIntervalMs = 60000, kDefaultIntervalMs = 1000;

  WebSocketSession(tcp::socket&& socket, std::shared_ptr<StreamService> service, StreamViewer viewer);
  ~WebSocketSession();

  // Completes the handshake for `req` (already authenticated).
  void run(http::request<http::string_body> req);

 private:
  void on_accept(beast::error_code ec);
  void do_read();
  void on_read(beast::error_code ec, std::size_t bytes);
  void handle_message(const std::string& text);
  void fail_subscribe(const std::string& message);

  void tick();  // sends a metrics snapshot and re-arms the timer
  void drain_jobs();

  void send(std::string message);
  void do_write();
  void on_write(beast::error_code ec, std::size_t bytes);
  // Sends the queued messages, then a close frame (1008 + reason).
  void close_after_writes(websocket::close_code code, const std::string& reason);
  void do_close();

  websocket::stream<beast::tcp_stream> ws_;
  beast::flat_buffer buffer_;
  std::shared_ptr<StreamService> service_;
  StreamViewer viewer_;
  net::steady_timer timer_;       // metrics interval
  net::steady_timer kill_timer_;  // a close that does not complete
  std::deque<std::string> queue_;
  bool writing_ = false;
  bool closing_ = false;  // no more messages; close once the queue is written
  bool closed_ = false;   // close frame sent (or the connection is gone)
  websocket::close_reason close_reason_;
  bool want_metrics_ = false;
  int interval_ms_ = kDefaultIntervalMs;
  uint64_t tick_generation_ = 0;
  std::shared_ptr<EventBus::Subscription> jobs_;
};

}  // namespace tensord
