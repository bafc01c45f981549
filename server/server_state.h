// State shared by the listener, the sessions and the server (Beast
// chat-multi's shared_state). No Beast here; included by server/*.cpp only.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>

#include "server/body_pool.h"
#include "server/caller.h"
#include "server/http_server.h"

namespace boost::asio {
class thread_pool;
}

namespace tensord {

class HttpMetrics;
class Router;
class StreamService;

struct ServerState {
  ServerOptions options;
  std::shared_ptr<const Router> router;
  HttpMetrics* metrics = nullptr;
  std::atomic<bool> draining{false};
  std::atomic<size_t> inflight{0};  // requests read and not yet answered
  // Who sent a request, from its Authorization header, once per request
  // after the headers (HttpServer::set_callers: the tenant, its lane, the
  // account its body is charged to); null function: no one (no lanes, no
  // body accounts; routes authenticate by the header).
  std::function<std::shared_ptr<const Caller>(std::string_view authorization)> resolve;
  // What resolve's answers depend on (the tenants' generation); a session
  // keeps its last caller while this and the Authorization header stay the
  // same. Null: every request resolved anew.
  std::function<uint64_t()> callers_generation;
  // Runs a request's task (an offloaded handler, the start of an async
  // one with a large body, a large answer's encoding) on its caller's lane
  // (HttpServer::set_lanes), else on the handler pool. Null: no pool (the
  // task runs on the connection).
  std::function<void(std::string_view lane, std::function<void()>)> offload_as;
  // The lane whose threads run a connection's socket I/O once a request
  // names its tenant (HttpSession moves the socket there), or null: the
  // io threads keep it. Null function: no lanes.
  std::function<boost::asio::thread_pool*(std::string_view lane)> lane_pool;
  // Large bodies' memory, reused across uploads (body_pool.h).
  std::shared_ptr<BodyPool> bodies = std::make_shared<BodyPool>(BodyPool::default_capacity());
  // GET /v1/stream upgrades (websocket_session.h); null: no WebSocket.
  std::shared_ptr<StreamService> streams;
};

}  // namespace tensord
