// The AsyncReply (router.h) of one asynchronous request on a connection:
// keeps what the answer needs (the request's id, route, HEAD-ness,
// keep-alive, its trace span) and hands the answer to the connection
// (ReplySink) once. Created by HttpSession::handle_async; finished from
// whichever thread ends the request's work. Included by server/*.cpp only.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "metrics/trace_request_scope.h"
#include "server/reply_sink.h"
#include "server/router.h"

namespace tensord {

class AsyncSessionReply : public AsyncReply, public std::enable_shared_from_this<AsyncSessionReply> {
 public:
  // `lane`: the request's caller's (server/caller.h); a heavy answer is
  // built there (ReplySink::offload).
  AsyncSessionReply(std::shared_ptr<ReplySink> sink, std::string method, std::string route, std::string request_id,
                    bool head, bool keep_alive, std::string lane);
  ~AsyncSessionReply() override;

  // Calls the matched route's handler (on the calling thread, which is the
  // request span's thread until the handler returns): what it throws is
  // the answer. A finish() before the handler returned takes effect then.
  void start(HttpRequest& req, RouteMatch& match);

  void finish(bool heavy, std::function<HttpResponse()> make) override;
  void on_client_gone(std::function<void()> f) override;
  // The connection saw the client go: runs the on_client_gone callback.
  void client_gone();

 private:
  // Builds the answer where `heavy` says and hands it to the sink.
  void deliver(bool heavy, std::function<HttpResponse()> make);
  // `make`, or its error reply; a job it submits joins the request's span.
  HttpResponse build(const std::function<HttpResponse()>& make);
  void send(HttpResponse out);  // on the connection's strand

  const std::shared_ptr<ReplySink> sink_;
  const std::string method_, route_, request_id_;
  const bool head_, keep_alive_;
  const std::string lane_;
  std::optional<TraceRequestScope> trace_;  // the request's span, until the answer
  std::mutex mu_;
  bool started_ = false;   // start() is done with the handler and trace_
  bool finished_ = false;  // the first finish() came
  bool deferred_heavy_ = false;
  std::function<HttpResponse()> deferred_;  // a finish() that came before started_
  bool gone_ = false;
  std::function<void()> on_gone_;
};

}  // namespace tensord
