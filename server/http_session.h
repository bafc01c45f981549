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
#include "api/json_b64_stream.h"
#include "server/beast.h"
#include "server/stream_inflater.h"
#include "server/parts_body.h"
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
  void rearm_body_timer();
  // A body of at least kDirectBodyBytes with a Content-Length: read with
  // the socket's own reads into its final string (from the body pool),
  // then handled as if Beast had read it.
  void start_body_direct(size_t len, BodyKind kind);
  void read_body_direct();
  // A kInflated route's body with Content-Encoding gzip or deflate and a
  // Content-Length: inflated as it arrives (stream_inflater.h), the
  // inflated bytes checked against --max-body-bytes and charged to the
  // tenant before they are held; the compressed ones are never held whole.
  // handle_request sees the inflated body and no Content-Encoding.
  void start_body_inflate(ContentCoding coding, size_t len, BodyKind kind);
  void read_body_inflate();
  // Feeds a piece to inflater_; false when that ended the request (its
  // error answered, the connection closing).
  bool inflate_piece(std::string_view in);
  // 64 KiB a read: one piece of a bomb inflates to at most ~64 MiB (zlib's
  // ratio is ~1032:1) before the limit stops it, a bounded stall for the
  // thread reading it.
  static constexpr size_t kInflateReadBytes = size_t{64} << 10;
  std::unique_ptr<StreamInflater> inflater_;
  std::string inflate_in_;   // the compressed body's read buffer
  size_t inflate_left_ = 0;  // its bytes still to come
  // What the request's route takes (server/router.h): kCharged and
  // kTensorUpload bodies are charged to the tenant as they arrive; a JSON
  // kTensorUpload body is read through b64_stream_, which decodes the
  // "b64" value as it comes. Matches the route (kept in early_ for
  // handle_request: one match per request).
  BodyKind route_body_kind();
  struct EarlyMatch {
    std::string path;
    std::map<std::string, std::string> query;
    RouteMatch match;
  };
  std::optional<EarlyMatch> early_;
  void read_body_stream();
  // Charges the tenant's account (body_account_) up to `held` bytes of the
  // body, in steps of kChargeStep (and all of it when `last`); false when
  // that passes its quota: the request is answered 429 and closed.
  bool charge_body(size_t held, bool last);
  // Charges or releases body_account_ to hold exactly `held` bytes; throws
  // (quota_exceeded) with nothing charged when that passes the quota.
  void charge_to(size_t held);
  void release_body_charge();
  // The body is all read: the low-water watch stopped, the mark back to 1,
  // its charge kept in body_charge_ for handle_request.
  void end_body_read();
  // Stops reading a large body: its buffers back to the pool, its charge
  // released.
  void drop_body();
  static constexpr size_t kChargeStep = size_t{1} << 20;
  std::shared_ptr<MemoryAccount> body_account_;
  size_t body_charged_ = 0;
  std::shared_ptr<void> body_charge_;  // the finished body's, for handle_request
  // SO_RCVLOWAT while a large body is read (see the definition).
  void set_low_water(size_t left);
  static constexpr size_t kLowWaterBytes = size_t{256} << 10;
  static constexpr std::chrono::microseconds kLowWaterPace{100'000};
  int low_water_ = 1;     // the socket's mark now
  size_t last_read_ = 0;  // what the body's last read brought, and when it was asked for
  std::chrono::steady_clock::time_point last_read_at_{};
  // While a large body is read: drops the mark to 1 when no read has
  // completed for kLowWaterWatch.
  void watch_low_water(bool on);
  static constexpr std::chrono::milliseconds kLowWaterWatch{200};
  std::optional<net::steady_timer> low_water_timer_;
  bool watching_body_ = false;
  uint64_t body_reads_ = 0;
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

  void do_write();
  void on_write(beast::error_code ec, std::size_t bytes);

  // linger: the peer may still be sending a body we did not read; read and
  // discard it for a moment so our reply is not lost to a TCP reset.
  void do_close(bool linger);
  void on_linger(beast::error_code ec, std::size_t bytes);

  void begin_request();  // headers read: counts the request as in flight
  void end_request();    // response written or connection lost

  // Read buffer while a large body streams in (Beast reads at most 64 KiB
  // a call, as much as the free capacity allows), and how often the body's
  // inactivity timer is re-armed.
  static constexpr size_t kBodyBufferBytes = 1 << 20;
  static constexpr std::chrono::milliseconds kTimerRearm{500};
  static constexpr size_t kDirectBodyBytes = size_t{4} << 20;
  std::string direct_body_;  // a body being read directly, and how much of it has come
  size_t direct_got_ = 0;
  std::optional<JsonB64Stream> b64_stream_;  // a body being decoded as it comes
  std::optional<DecodedB64> decoded_b64_;    // what it decoded, for handle_request
  size_t streamed_bytes_ = 0;                // and the body's length

  // In an optional so that move_to_lane can rebuild it on another executor
  // (a Beast stream cannot be reassigned).
  std::optional<beast::tcp_stream> stream_;
  boost::asio::thread_pool* lane_ = nullptr;  // whose threads run the socket; null: the io threads
  beast::flat_buffer buffer_;
  std::chrono::steady_clock::time_point body_timer_armed_{};
  std::shared_ptr<ServerState> state_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<PartsBody> res_;
  std::optional<http::response_serializer<PartsBody>> serializer_;

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
