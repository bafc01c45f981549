// The AsyncReply (router.h) of one asynchronous request on an HttpSession:
// keeps what the answer needs (the request's id, route, HEAD-ness,
// keep-alive, its trace span) and sends the answer on the session's strand,
// once. Created by HttpSession::handle_async; finished from whichever
// thread ends the request's job. Included by server/*.cpp only.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "metrics/trace_request_scope.h"
#include "server/router.h"

namespace tensord {

class HttpSession;

class AsyncSessionReply : public AsyncReply, public std::enable_shared_from_this<AsyncSessionReply> {
 public:
  // `authorization`: the request's Authorization header; a large answer is
  // encoded on its tenant's lane (ServerState::offload_as).
  AsyncSessionReply(std::shared_ptr<HttpSession> session, std::string method, std::string route, std::string request_id,
                    bool head, bool keep_alive, std::string authorization);
  ~AsyncSessionReply() override;

  // Runs the route's handler (on the calling thread, which becomes the
  // request span's thread until the handler returns): what it throws is the
  // answer.
  void start(HttpRequest& req);

  void finish(bool heavy, std::function<HttpResponse()> make) override;
  void on_client_gone(std::function<void()> f) override;
  // The session saw the client go: runs the on_client_gone callback.
  void client_gone();

 private:
  HttpResponse build(const std::function<HttpResponse()>& make) const;
  void send(HttpResponse out);  // on the session's strand

  const std::shared_ptr<HttpSession> session_;
  const std::string method_, route_, request_id_;
  const bool head_, keep_alive_;
  const std::string authorization_;
  std::optional<TraceRequestScope> trace_;  // the request's span, until the answer
  std::atomic<bool> started_{false};        // start() is done with trace_
  std::mutex mu_;
  bool finished_ = false;
  bool gone_ = false;
  std::function<void()> on_gone_;
};

}  // namespace tensord
