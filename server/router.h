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
// add() is not thread-safe; dispatch() is const and safe to call from many
// threads once the routes are set.
#pragma once

#include <functional>
#include <map>
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

// Where a handler runs. kInline: on the connection's io thread (cheap,
// non-blocking routes: health, metrics, tensor reads). kOffload: on the
// server's handler pool, so a handler that waits (a /v1/jobs submit that
// compiles a program) never holds an io thread and /healthz stays
// answerable under load. kAsync: the handler starts a job and returns; the
// job's end answers (AsyncReply). No thread waits for the job, and a small
// request makes no trip through the handler pool: it starts on the io
// thread (a body over the route's limit is parsed on the pool).
enum class Dispatch { kInline, kOffload, kAsync };

class Router {
 public:
  // Throws std::invalid_argument on a malformed template (a bug, not input).
  void add(std::string method, const std::string& route_template, Handler h, Dispatch d = Dispatch::kInline);
  // `inline_body_bytes`: a body up to this size starts the handler on the
  // io thread (parsing it is quick); a larger one on the handler pool.
  void add_async(std::string method, const std::string& route_template, AsyncHandler h, size_t inline_body_bytes);

  // How the route matching (method, path) runs (kInline when none
  // matches); its template and, for kAsync, its inline body limit when asked.
  Dispatch dispatch_of(const std::string& method, const std::string& path, std::string* route_template = nullptr,
                       size_t* inline_body_bytes = nullptr) const;

  // For a kAsync route: sets req.route and req.params and calls its handler.
  // Any other request is answered through reply->finish with dispatch().
  void dispatch_async(HttpRequest& req, const std::shared_ptr<AsyncReply>& reply) const;

  // Sets req.route (the template) and req.params and calls the handler.
  // Unknown path: throws Error(kNotFound). Known path, other method: returns
  // 405 with an Allow header (see router.cpp). HEAD without a HEAD route runs
  // the GET handler (the session drops the body).
  HttpResponse dispatch(HttpRequest& req) const;

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
    Handler handler;
    AsyncHandler async;      // kAsync
    size_t inline_body = 0;  // kAsync: bodies up to this start on the io thread
    Dispatch dispatch = Dispatch::kInline;
    size_t literal_chars = 0;
    int params = 0;
    bool greedy = false;
    size_t order = 0;
  };

  // Parses the template into r's pieces and adds r in precedence order.
  void insert(Route r, std::string method, const std::string& route_template);
  static bool match(const std::vector<Piece>& pieces, size_t piece, const std::string& path, size_t pos,
                    std::map<std::string, std::string>& params);

  // Routes sorted by precedence (see above).
  std::vector<Route> routes_;
};

}  // namespace tensord
