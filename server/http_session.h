// One HTTP/1.1 connection (Beast chat-multi's http_session): reads requests
// with a fresh parser each (body and header limits), matches each request's
// route once and answers it inline or asynchronously (router.h, Dispatch),
// writes the response, keeps the connection alive or closes it. All of a
// session's handlers run on its strand. Included by server/*.cpp only.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/http_types.h"
#include "server/beast.h"
#include "server/content_coding.h"
#include "server/io_deadline.h"
#include "server/request_body.h"
#include "server/response_writer.h"
#include "server/reply_sink.h"
#include "server/router.h"

namespace tensord {

class AsyncSessionReply;
class MemoryAccount;
class Error;
struct ServerState;

class HttpSession : public ReplySink, public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket&& socket, std::shared_ptr<ServerState> state);
  ~HttpSession() override;

  void run();

  // ReplySink: what an asynchronous request's reply uses of the session.
  void dispatch(std::function<void()> f) override;
  void offload(std::string_view lane, std::function<void()> f) override;
  void answer(HttpResponse&& out, const std::string& route, bool head, bool keep_alive) override;

 private:
  void do_read_header();
  void on_read_header(beast::error_code ec, std::size_t bytes);
  // The headers are read: the rest of the request (its body, the answer
  // and what follows on this connection) on the current strand.
  void after_header();
  // Moves the socket to `lane`'s threads (a new strand there) when the
  // request's tenant has a lane other than the one the socket is on;
  // returns whether it moved (after_header then runs on the new strand).
  // Nothing is pending on the socket when it is called.
  bool move_to_lane(const std::string& lane_name);
  // Who sent the request (server/caller.h), through ServerState::resolve;
  // the connection's last caller when its header and the tenants'
  // generation are the same. Null without a resolver.
  std::shared_ptr<const Caller> caller_for(std::string_view authorization);
  std::shared_ptr<const Caller> last_caller_;
  std::string last_authorization_;
  uint64_t last_caller_generation_ = 0;
  void on_continue_sent(beast::error_code ec, std::size_t bytes);
  // The body's first read: picks how it is read (below).
  void do_read_body();
  // Through Beast's parser (small bodies, those without a Content-Length).
  void read_body_parsed();
  void on_read_body(beast::error_code ec, std::size_t bytes);
  void rearm_body_timer();  // the deadline: header_timeout from now
  // With the socket's own reads, through a RequestBody (request_body.h):
  // a body of at least kDirectBodyBytes with a Content-Length (into its
  // final string from the body pool; a JSON kTensorUpload body decoding
  // its "b64" value as it comes), and a kInflated route's body with
  // Content-Encoding gzip or deflate and a Content-Length (inflated as it
  // arrives, checked against --max-body-bytes and charged before the
  // bytes are held; handle_request sees the inflated body and no
  // Content-Encoding). Then handled as if Beast had read it.
  void start_body(RequestBody::Mode mode, size_t len, BodyKind kind, std::optional<ContentCoding> coding = {});
  void read_body_socket();
  // The body is all read: the low-water watch stopped, the mark back to
  // 1, what handle_request takes set aside (decoded_b64_, body_charge_).
  void finish_body();
  // Stops reading a large body: its buffers back to the pool, its charge
  // released.
  void drop_body();
  std::optional<RequestBody> body_;
  std::shared_ptr<void> body_charge_;  // the finished body's, for handle_request
  // What the request's route takes (server/router.h): kCharged and
  // kTensorUpload bodies are charged to the tenant as they arrive; a JSON
  // kTensorUpload body is read through a kB64 RequestBody. Matches the
  // route (kept in early_ for handle_request: one match per request).
  BodyKind route_body_kind();
  struct EarlyMatch {
    std::string path;
    std::map<std::string, std::string> query;
    RouteMatch match;
  };
  std::optional<EarlyMatch> early_;
  // SO_RCVLOWAT while a large body is read (see the definition).
  void set_low_water(int want);
  static constexpr size_t kLowWaterBytes = size_t{256} << 10;
  static constexpr std::chrono::microseconds kLowWaterPace{100'000};
  int low_water_ = 1;  // the socket's mark now
  // While a large body is read (body_ set): drops the mark to 1 when no
  // read has completed for kLowWaterWatch.
  void watch_low_water(bool on);
  static constexpr std::chrono::milliseconds kLowWaterWatch{200};
  std::optional<net::steady_timer> low_water_timer_;
  // A read failed: answer 400/413 when it was the request's fault, else close.
  void on_read_error(beast::error_code ec);

  void handle_request();
  // An upgrade route (RouteMatch::upgrades: GET /v1/stream) with Upgrade:
  // websocket: authenticates (401 on failure) and hands the socket to a
  // WebSocketSession.
  void upgrade(http::request<http::string_body>&& msg, HttpRequest& req, const std::string& route);
  // A kInline route (or none matched: 404, 405, a bad target): calls it
  // with the one error policy (error_policy.h); never throws.
  HttpResponse call_handler(HttpRequest& req, RouteMatch* match);
  // A kAsync route: starts it here (small body) or on the handler pool;
  // its AsyncSessionReply answers through answer() on this strand later.
  void handle_async(HttpRequest&& req, RouteMatch&& match, bool client_keep_alive);
  std::weak_ptr<AsyncSessionReply> pending_reply_;  // the async request awaiting its answer
  // While an asynchronous request awaits its answer: notice the client
  // closing the connection (pending_reply_->client_gone()).
  void watch_disconnect();
  void stop_watching();
  bool watching_ = false;
  bool watch_wanted_ = false;  // until the handler's reply: a spurious wake re-arms the watch
  // Answers an error decided before the router ran, then closes.
  void reply_and_close(const Error& e);
  void send(HttpResponse&& out, bool head, bool keep_alive);

  // Writes writer_'s response: what the socket takes at once, then the
  // rest as it drains; on_written reads the next request or closes.
  void do_write();
  void on_write(beast::error_code ec, std::size_t bytes);
  void on_written();

  // linger: the peer may still be sending a body we did not read; read and
  // discard it for a moment so our reply is not lost to a TCP reset.
  void do_close(bool linger);
  void on_linger(beast::error_code ec, std::size_t bytes);

  void begin_request();  // headers read: counts the request as in flight
  void end_request();    // response written or connection lost

  // Read buffer while a large body streams in (Beast reads at most 64 KiB
  // a call, as much as the free capacity allows).
  static constexpr size_t kBodyBufferBytes = 1 << 20;
  static constexpr size_t kDirectBodyBytes = size_t{4} << 20;
  std::optional<DecodedB64> decoded_b64_;  // what a kB64 body decoded, for handle_request
  size_t streamed_bytes_ = 0;              // and the body's length

  // In an optional so that move_to_lane can rebuild it on another executor
  // (a Beast stream cannot be reassigned).
  std::optional<beast::tcp_stream> stream_;
  // The I/O deadline (io_deadline.h): the stream's own timeouts are never
  // set. On the socket's executor: made by run() and again by move_to_lane.
  std::optional<IoDeadline> deadline_;
  void make_deadline();
  boost::asio::thread_pool* lane_ = nullptr;  // whose threads run the socket; null: the io threads
  beast::flat_buffer buffer_;
  std::shared_ptr<ServerState> state_;
  std::optional<http::request_parser<http::string_body>> parser_;
  ResponseWriter writer_;
  std::vector<net::const_buffer> out_buffers_;  // an asynchronous write's buffers

  bool first_request_ = true;
  bool in_flight_ = false;
  bool close_after_write_ = false;
  bool linger_ = false;
  std::size_t lingered_bytes_ = 0;
  std::string request_id_;
  std::string route_;  // for metrics: template, or "" when unmatched
  std::string method_;
  std::shared_ptr<std::string> caller_;  // the request's tenant, once authenticated (log line)
  std::shared_ptr<const Caller> who_;    // who sent the request being read (server/caller.h)
  size_t bytes_in_ = 0;                  // the request body's size (log line)
  unsigned version_ = 11;                // of the request being answered: 10 or 11
  std::chrono::steady_clock::time_point start_;
  std::unique_ptr<std::array<char, 16 * 1024>> discard_;  // only while lingering
};

}  // namespace tensord
