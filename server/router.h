// Maps (method, path) to a handler. Templates are literal text with {params}:
//   "/v1/tensors/{name}"       {name} matches one non-empty path segment
//   "/v1/tensors/{name...}"    greedy: one or more characters, '/' included
//   "/v1/graphs/{id}/replay", "/v1/tensors:upload", "/v1/jobs/{id}:cancel"
// A param must be followed by literal text or end the template, and a
// template holds at most one greedy param (so matching is linear-ish).
// Precedence when several templates match a path: param-free templates first,
// then the one with the most literal characters, then non-greedy before
// greedy, then registration order.
// The path is already percent-decoded (by the session); params are not
// validated here: handlers validate names (e.g. a decoded "..").
// add*() are not thread-safe; match() is const and safe to call from many
// threads once the routes are set. One match per request: match() finds
// the route, RouteMatch::call or call_async runs it (see Dispatch below).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <string>
#include <vector>

#include "api/http_types.h"

namespace tensord {

using Handler = std::function<HttpResponse(HttpRequest&)>;

// The later answer of an asynchronous route (a job's end). Thread-safe;
// the first finish() answers, later ones are ignored.
class AsyncReply {
 public:
  virtual ~AsyncReply() = default;
  // Builds the response with `make` and sends it: on the connection's io
  // thread, or on the handler pool when `heavy` (encoding large results).
  // What `make` throws is answered as handlers' errors are.
  virtual void finish(bool heavy, std::function<HttpResponse()> make) = 0;
  // Called (once, from any thread) when the client goes away before the
  // answer; at once if it already has.
  virtual void on_client_gone(std::function<void()> f) = 0;
};
// Starts the work (validates, queues a job) and returns; what it throws is
// the answer. Otherwise it must arrange for reply->finish() to be called.
using AsyncHandler = std::function<void(HttpRequest&, std::shared_ptr<AsyncReply>)>;

// How a request is answered: two ways.
//   kInline: the handler runs on the connection's io thread and returns the
//     answer (cheap, non-blocking routes: health, metrics, job status).
//   kAsync: the handler starts the work and returns; the answer comes later
//     through an AsyncReply (a job's end), and no thread waits for it. A
//     request whose body is up to the route's inline limit starts on the io
//     thread, a larger one on the handler pool (the tenant's lane).
// A handler that blocks (compiles a program, decodes or encodes a large
// tensor, waits) is an asynchronous route too: add_offloaded() wraps it so
// that it runs on the handler pool (AsyncReply::finish with heavy = true)
// and its return value is the answer. So an io thread never waits and
// /healthz stays answerable under load. Why not a third way: everything
// that leaves the io thread then goes through one path (the session's
// AsyncSessionReply: the hand-offs, the trace span, the client going
// away), and the session knows only "answer now" and "answer later".
enum class Dispatch { kInline, kAsync };

// What a route's body is. kCharged (tensors to store or run): a large body
// is charged to the tenant as it arrives (HttpServer::set_body_accounts,
// HttpRequest::body_charge). kTensorUpload (one tensor to store): that, and
// a JSON body's top-level "b64" value is decoded as it arrives (the handler
// reads it with tensor_from_json_request; HttpRequest::decoded_b64).
// kInflated (KServe infer: API.md 11.1): kCharged, and a body sent with
// Content-Encoding gzip or deflate and a Content-Length is inflated as it
// arrives, its inflated size checked and charged as it grows; the handler
// sees the inflated body without the Content-Encoding header.
enum class BodyKind { kOther, kCharged, kTensorUpload, kInflated };

// Who may call a route. kTenant (every route but health, metrics and the
// OpenAPI spec: API.md 9): the router's authenticator (set_authenticator)
// runs first, on the thread that starts the request, and what it throws is
// the answer (401), so no handler authenticates for itself. kPublic: none.
enum class Access { kTenant, kPublic };

class Router;

// What one request matched (Router::match): the route's handler, the
// template and params, how it runs. The session matches once, when the
// headers and body are read, and carries this to the handler's call.
// Points into the router, which must outlive it.
class RouteMatch {
 public:
  Dispatch dispatch() const { return async_ != nullptr ? Dispatch::kAsync : Dispatch::kInline; }
  // kAsync: a body up to this size starts on the io thread.
  size_t inline_body_bytes() const { return inline_body_; }
  BodyKind body_kind() const { return body_kind_; }
  // The template as API.md writes it ("/v1/tensors/{name}"); for a known
  // path with another method the path's first route; "" when no route
  // matches the path.
  const std::string& route() const { return route_; }
  // The route's authenticator (kTenant routes, when the router has one).
  bool authenticates() const { return auth_ != nullptr; }
  // A route that takes a protocol upgrade (add_upgrade): the session hands
  // a request carrying `Upgrade:` to the protocol's session, and calls the
  // handler (the answer without one) otherwise.
  bool upgrades() const { return upgrade_; }

  // kInline: sets req.route and req.params, authenticates (kTenant) and
  // calls the handler. Unknown
  // path: throws Error(kNotFound). Known path, other method: returns 405
  // with an Allow header (see router.cpp). Call once.
  HttpResponse call(HttpRequest& req);
  // kAsync: sets req.route and req.params, authenticates (kTenant) and
  // calls the handler; what either throws is the answer. Another match is answered through `reply` at
  // once (call()). Call once.
  void call_async(HttpRequest& req, const std::shared_ptr<AsyncReply>& reply);

 private:
  friend class Router;  // fills it
  std::string route_;
  std::map<std::string, std::string> params_;
  const Handler* handler_ = nullptr;
  const AsyncHandler* async_ = nullptr;
  const std::function<void(HttpRequest&)>* auth_ = nullptr;
  bool upgrade_ = false;
  size_t inline_body_ = 0;
  BodyKind body_kind_ = BodyKind::kOther;
  std::string allow_;  // no handler, the path is known: the methods it has (405)
};

class Router {
 public:
  Router() = default;
  Router(const Router&) = delete;  // the index points into routes_
  Router& operator=(const Router&) = delete;

  // Throws std::invalid_argument on a malformed template (a bug, not input).
  void add(std::string method, const std::string& route_template, Handler h, Access access = Access::kTenant);
  // `inline_body_bytes`: a body up to this size starts the handler on the
  // io thread (parsing it is quick); a larger one on the handler pool.
  void add_async(std::string method, const std::string& route_template, AsyncHandler h, size_t inline_body_bytes,
                 BodyKind body_kind = BodyKind::kOther, Access access = Access::kTenant);
  // A handler that may block (waits on a job, decodes or encodes a large
  // tensor): an asynchronous route that runs `h` on the handler pool (the
  // tenant's lane) and answers with what it returns or throws.
  void add_offloaded(std::string method, const std::string& route_template, Handler h,
                     BodyKind body_kind = BodyKind::kOther, Access access = Access::kTenant);
  // A route served by another protocol after an upgrade (GET /v1/stream:
  // a WebSocket). `h` answers a request without the upgrade. The session
  // does the upgrade (it owns the socket) and its protocol authenticates.
  void add_upgrade(std::string method, const std::string& route_template, Handler h, Access access = Access::kTenant);
  // Runs before the handler of every kTenant route (sets and checks who
  // the request is from; throws to answer it). Unset: no route checks.
  void set_authenticator(std::function<void(HttpRequest&)> auth) { auth_ = std::move(auth); }

  // The route for (method, path): the first in precedence order with this
  // method; HEAD without a HEAD route takes the GET route (the session
  // drops the body). None: a match whose call() answers 404 or 405.
  RouteMatch match(const std::string& method, const std::string& path) const;

  size_t size() const { return routes_.size(); }

 private:
  struct Piece {
    std::string literal;  // literal text, or the param name
    bool param = false;
    bool greedy = false;
  };
  struct Route {
    std::string method;
    std::string route_template;  // as reported in req.route: "{name...}" shown as "{name}"
    std::string raw_template;    // as registered
    std::vector<Piece> pieces;
    Handler handler;         // kInline
    AsyncHandler async;      // kAsync
    size_t inline_body = 0;  // kAsync: bodies up to this start on the io thread
    BodyKind body_kind = BodyKind::kOther;
    Access access = Access::kTenant;
    bool upgrade = false;
    size_t literal_chars = 0;
    int params = 0;
    bool greedy = false;
    size_t order = 0;
  };

  // Parses the template into r's pieces and adds r in precedence order.
  void insert(Route r, std::string method, const std::string& route_template);
  static bool match_pieces(const std::vector<Piece>& pieces, size_t piece, const std::string& path, size_t pos,
                           std::map<std::string, std::string>& params);

  // Fills `m` from route `r` (its handler, body, access).
  void fill(RouteMatch& m, const Route& r) const;

  // Routes sorted by precedence (see above).
  std::vector<Route> routes_;
  std::function<void(HttpRequest&)> auth_;

  // The routes a path can match, by the path's first two segments
  // ("/v1/graphs" of "/v1/graphs/g-1/replay", segment_key): a route whose
  // leading literal holds them is listed under them only; one with a param
  // among them (none today) under every key and in wild_. Each list keeps
  // precedence order. Rebuilt by insert().
  static std::string_view segment_key(std::string_view s);
  void index_routes();
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::vector<const Route*>, KeyHash, std::equal_to<>> by_key_;
  std::vector<const Route*> wild_;  // for a path under no key
};

}  // namespace tensord
