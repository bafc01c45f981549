#include "server/async_session_reply.h"

#include <optional>
#include <utility>

#include "api/error_reply.h"
#include "server/http_session.h"
#include "server/server_state.h"

namespace tensord {

AsyncSessionReply::AsyncSessionReply(std::shared_ptr<HttpSession> session, std::string method, std::string route,
                                     std::string request_id, bool head, bool keep_alive, std::string authorization)
    : session_(std::move(session)),
      method_(std::move(method)),
      route_(std::move(route)),
      request_id_(std::move(request_id)),
      head_(head),
      keep_alive_(keep_alive),
      authorization_(std::move(authorization)) {}

AsyncSessionReply::~AsyncSessionReply() = default;

void AsyncSessionReply::start(HttpRequest& req) {
  // The span starts now on this thread (a job queued by the handler links
  // its flow to it) and ends when the answer is sent.
  trace_.emplace(method_, route_, request_id_);
  auto self = shared_from_this();
  std::optional<HttpResponse> err;
  try {
    session_->state_->router->dispatch_async(req, self);
  } catch (...) {
    err = HttpSession::guarded([]() -> HttpResponse { throw; }, request_id_, method_, route_, error_style_for(route_));
  }
  trace_->detach();
  started_.store(true, std::memory_order_release);
  if (err) finish(false, [e = std::move(*err)]() mutable { return std::move(e); });
}

HttpResponse AsyncSessionReply::build(const std::function<HttpResponse()>& make) const {
  return HttpSession::guarded(make, request_id_, method_, route_, error_style_for(route_));
}

void AsyncSessionReply::finish(bool heavy, std::function<HttpResponse()> make) {
  {
    std::lock_guard lock(mu_);
    if (finished_) return;
    finished_ = true;
  }
  auto self = shared_from_this();
  auto executor = session_->stream_.get_executor();
  if (heavy && session_->state_->offload) {
    // Encoding a large answer is its tenant's work: on its lane.
    session_->state_->offload_as(authorization_, [self, executor, make = std::move(make)]() mutable {
      HttpResponse out = self->build(make);
      net::post(executor, [self, out = std::move(out)]() mutable { self->send(std::move(out)); });
    });
  } else {
    net::post(executor, [self, make = std::move(make)]() mutable { self->send(self->build(make)); });
  }
}

void AsyncSessionReply::send(HttpResponse out) {
  if (!started_.load(std::memory_order_acquire)) {
    // A job that ended before its handler (on the pool) returned: the span
    // is still the handler thread's for a moment.
    net::post(session_->stream_.get_executor(),
              [self = shared_from_this(), out = std::move(out)]() mutable { self->send(std::move(out)); });
    return;
  }
  HttpSession& s = *session_;
  s.route_ = route_;
  s.stop_watching();
  s.pending_reply_.reset();
  trace_.reset();  // the request's span ends with its answer
  const bool keep_alive = keep_alive_ && !s.state_->draining.load();
  s.send(std::move(out), head_, keep_alive);
}

void AsyncSessionReply::on_client_gone(std::function<void()> f) {
  {
    std::lock_guard lock(mu_);
    if (!gone_) {
      on_gone_ = std::move(f);
      return;
    }
  }
  f();
}

void AsyncSessionReply::client_gone() {
  std::function<void()> f;
  {
    std::lock_guard lock(mu_);
    gone_ = true;
    f.swap(on_gone_);
  }
  if (f) f();
}

}  // namespace tensord
