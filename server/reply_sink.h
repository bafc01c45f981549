// What an asynchronous request's reply (AsyncSessionReply) needs from its
// connection, and nothing more: running work on the connection's strand or
// on the request's lane, and writing the answer. HttpSession implements
// it. Included by server/*.cpp only.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "api/http_types.h"

namespace tensord {

class ReplySink {
 public:
  virtual ~ReplySink() = default;

  // Runs f on the connection's strand: at once when called there (a job
  // that ended while its handler ran is answered without a hand-off),
  // else queued to it.
  virtual void dispatch(std::function<void()> f) = 0;
  // Runs f on `lane` (the request's caller's, server/caller.h), else on
  // the handler pool; on the strand when the server has no pool.
  virtual void offload(std::string_view lane, std::function<void()> f) = 0;
  // On the strand: writes `out` as the answer to the request awaiting one
  // and stops watching for the client going away. `route`: the template
  // for the metrics and the log line; `head`: no body; `keep_alive`: what
  // the client asked (the connection closes anyway while draining).
  virtual void answer(HttpResponse&& out, const std::string& route, bool head, bool keep_alive) = 0;
};

}  // namespace tensord
