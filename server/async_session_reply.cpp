#include "server/async_session_reply.h"

#include <utility>

#include "server/error_policy.h"

namespace tensord {

AsyncSessionReply::AsyncSessionReply(std::shared_ptr<ReplySink> sink, std::string method, std::string route,
                                     std::string request_id, bool head, bool keep_alive, std::string lane)
    : sink_(std::move(sink)),
      method_(std::move(method)),
      route_(std::move(route)),
      request_id_(std::move(request_id)),
      head_(head),
      keep_alive_(keep_alive),
      lane_(std::move(lane)) {}

AsyncSessionReply::~AsyncSessionReply() = default;

void AsyncSessionReply::start(HttpRequest& req, RouteMatch& match) {
  // The span starts now on this thread (a job queued by the handler links
  // its flow to it) and ends when the answer is sent.
  trace_.emplace(method_, route_, request_id_);
  std::optional<HttpResponse> err;
  try {
    match.call_async(req, shared_from_this());
  } catch (...) {
    err = guarded([]() -> HttpResponse { throw; }, request_id_, method_, route_, error_style_for(route_));
  }
  trace_->detach();
  // A finish() that came meanwhile (from the handler, or a job that ended
  // before the handler returned) waited for the span to be detached.
  std::function<HttpResponse()> make;
  bool heavy = false;
  {
    std::lock_guard lock(mu_);
    started_ = true;
    make.swap(deferred_);
    heavy = deferred_heavy_;
  }
  if (make) deliver(heavy, std::move(make));
  if (err) finish(false, [e = std::move(*err)]() mutable { return std::move(e); });
}

void AsyncSessionReply::finish(bool heavy, std::function<HttpResponse()> make) {
  {
    std::lock_guard lock(mu_);
    if (finished_) return;
    finished_ = true;
    if (!started_) {
      deferred_ = std::move(make);
      deferred_heavy_ = heavy;
      return;
    }
  }
  deliver(heavy, std::move(make));
}

void AsyncSessionReply::deliver(bool heavy, std::function<HttpResponse()> make) {
  auto self = shared_from_this();
  if (heavy) {
    // Building a large answer (or running an offloaded handler) is its
    // tenant's work: on its lane.
    sink_->offload(lane_, [self, make = std::move(make)] {
      HttpResponse out = self->build(make);
      self->sink_->dispatch([self, out = std::move(out)]() mutable { self->send(std::move(out)); });
    });
  } else {
    sink_->dispatch([self, make = std::move(make)] { self->send(self->build(make)); });
  }
}

HttpResponse AsyncSessionReply::build(const std::function<HttpResponse()>& make) {
  // Only one build runs (the first finish), after start() detached the
  // span and before send() ends it.
  trace_->attach();
  HttpResponse out = guarded(make, request_id_, method_, route_, error_style_for(route_));
  trace_->detach();
  return out;
}

void AsyncSessionReply::send(HttpResponse out) {
  trace_.reset();  // the request's span ends with its answer
  sink_->answer(std::move(out), route_, head_, keep_alive_);
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
