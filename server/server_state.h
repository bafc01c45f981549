// State shared by the listener, the sessions and the server (Beast
// chat-multi's shared_state). No Beast here; included by server/*.cpp only.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>

#include "server/body_pool.h"
#include "server/http_server.h"

namespace boost::asio {
class thread_pool;
}

namespace tensord {

class HttpMetrics;
class MemoryAccount;
class Router;
class StreamService;

struct ServerState {
  ServerOptions options;
  std::shared_ptr<const Router> router;
  HttpMetrics* metrics = nullptr;
  std::atomic<bool> draining{false};
  std::atomic<size_t> inflight{0};  // requests read and not yet answered
  // Runs a request's task (an offloaded handler, the start of an async
  // one with a large body, a large answer's encoding) on the lane of the
  // tenant its Authorization header names (HttpServer::set_lanes), else on
  // the handler pool. Null: no pool (the task runs on the connection).
  std::function<void(std::string_view authorization, std::function<void()>)> offload_as;
  // The lane whose threads run a connection's socket I/O once a request
  // names its tenant (HttpSession moves the socket there), or null: the
  // io threads keep it. Null function: no lanes.
  std::function<boost::asio::thread_pool*(std::string_view authorization)> lane_pool;
  // The memory account an upload's body is charged to while it is read
  // (HttpServer::set_body_accounts); null function or result: none.
  std::function<std::shared_ptr<MemoryAccount>(std::string_view authorization)> body_account;
  // Large bodies' memory, reused across uploads (body_pool.h).
  std::shared_ptr<BodyPool> bodies = std::make_shared<BodyPool>(BodyPool::default_capacity());
  // GET /v1/stream upgrades (websocket_session.h); null: no WebSocket.
  std::shared_ptr<StreamService> streams;
};

}  // namespace tensord
