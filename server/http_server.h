// The HTTP/1.1 server: a listener accepting connections, one http_session per
// connection (strand per connection, keep-alive, limits and timeouts), and
// graceful drain on SIGINT/SIGTERM or request_stop(). The shape is Beast's
// example/websocket/server/chat-multi (STYLE.md item 8); Beast itself stays in
// server/*.cpp, so this header is cheap to include.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tensord {

struct Caller;
class Router;
class StreamService;

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;                     // 0 = an ephemeral port (see HttpServer::port())
  size_t max_body_bytes = 1ull << 30;       // larger bodies get 413 payload_too_large
  size_t max_header_bytes = 16 * 1024;      // request line + headers; larger is 400
  int io_threads = 0;                       // <= 0: max(2, hardware_concurrency)
  int handler_threads = 32;                 // pool for offloaded handlers (router.h add_offloaded)
  std::chrono::seconds header_timeout{30};  // to receive a request's headers; also
                                            // the inactivity limit while a body or
                                            // a response is in transit
  std::chrono::seconds idle_timeout{75};    // keep-alive wait for the next request
  std::chrono::seconds drain_timeout{30};   // longest wait for in-flight requests
  bool record_metrics = true;               // false: tensord_http_* are neither registered nor recorded
};

class HttpServer {
 public:
  // Binds and listens at once (so port() is known before run()). Throws
  // std::runtime_error when the address cannot be bound.
  HttpServer(ServerOptions options, std::shared_ptr<const Router> router);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound port (the ephemeral one when options.port was 0).
  uint16_t port() const;

  // Blocks: runs the io_context on io_threads threads (this one included).
  // On SIGINT/SIGTERM or request_stop(): stops accepting (new requests get
  // 503 with Retry-After), marks draining and calls hooks.begin; waits until
  // no request is in flight and hooks.busy() is 0, or drain_timeout passed.
  // Past the timeout it calls hooks.expire (cancel what runs) and waits up
  // to kCancelGrace more for the cancelled work to answer, then stops and
  // returns. A second signal ends the wait at once (expire, grace); a third
  // stops at once. The signal handling never blocks the control strand.
  // Handlers run on the io threads. Call once.
  void run();

  // True once draining started. Thread-safe.
  bool draining() const;

  // Requests currently between "headers read" and "response written".
  size_t inflight() const;

  // Same as SIGTERM. Thread-safe; before run() it takes effect when run() starts.
  void request_stop();

  // What a drain waits for and cancels besides HTTP requests (jobs). Each
  // hook runs on the server's control strand and must not block. Set before
  // run().
  struct DrainHooks {
    std::function<void()> begin;   // once, when draining starts: refuse new work
    std::function<size_t()> busy;  // work still running that the drain waits for
    std::function<void()> expire;  // the timeout passed: cancel the rest (called again while it lasts)
  };
  void set_drain_hooks(DrainHooks hooks);
  // Same as set_drain_hooks({on_drain, {}, {}}).
  void set_on_drain(std::function<void()> on_drain);

  // How long cancelled work may take to stop and answer after the timeout.
  static constexpr std::chrono::seconds kCancelGrace{2};

  // Tenant lanes (decoding and encoding large bodies is the tenant's
  // work). What the handler pool would do for a request (an
  // offloaded handler: a PUT's or upload's body decoded, a GET's answer
  // encoded; the start of an asynchronous request with a large body; a
  // large job result's encoding) runs instead on its caller's lane
  // (Caller::lane, set_callers): `threads` threads pinned to the
  // lane's `cpus` at the partition threads' nice (ops/cpu/thread_pool.h),
  // so it competes only with that tenant's partition and never takes
  // another tenant's cores or the io threads' CPU time. A request whose
  // lane is unknown (no or a bad token: the handler answers 401) runs on
  // the shared pool. Call before run().
  //
  // Why a lane of pinned threads, not pinning a pool thread while it
  // works: a thread may raise its own nice but not lower it back without
  // privilege, and at nice 0 the pinned work still starved the io threads
  // that every tenant's requests pass through. The io threads (reading
  // bodies off sockets, writing answers) stay shared and unpinned.
  struct Lane {
    std::vector<int> cpus;
    int threads = 2;
  };
  void set_lanes(const std::map<std::string, Lane>& lanes);

  // Who sent each request (server/caller.h), from its Authorization
  // header, called once per request as soon as its headers are read; the
  // result goes to the routes as HttpRequest::who. Its lane picks the
  // request's lane (set_lanes). Tensor bodies (BodyKind::kCharged,
  // kTensorUpload) are charged to its account as their bytes arrive (a
  // safetensors body's bytes, a JSON body's decoded b64), so a tenant's
  // uploads in flight count against its memory quota with what it stores;
  // an upload that would pass it is answered 429 quota_exceeded at once,
  // before the rest of its body is read. The charge is handed to the
  // request (HttpRequest::body_charge). What `resolve` throws is taken as
  // no caller. `generation` (may be null) is what resolve's answers depend
  // on: while it and a connection's Authorization header stay the same,
  // the connection's next request keeps its last caller (the header
  // compared in constant time) instead of hashing the token again. Call
  // before run().
  void set_callers(std::function<std::shared_ptr<const Caller>(std::string_view authorization)> resolve,
                   std::function<uint64_t()> generation = nullptr);

  // Serves GET /v1/stream WebSocket upgrades from `streams`. Set before run().
  void set_stream_service(std::shared_ptr<StreamService> streams);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensord
