#include "server/websocket_session.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

namespace tensord {
namespace {

constexpr std::chrono::seconds kCloseTimeout{5};
constexpr size_t kMaxMessageBytes = 64 * 1024;

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void str(Writer& w, const std::string& s) {
  w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
}

std::string job_event_json(const JobStateEvent& e) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("type");
  w.String("job");
  w.Key("id");
  str(w, e.id);
  w.Key("state");
  str(w, e.state);
  w.Key("tenant");
  str(w, e.tenant);
  w.Key("partition");
  str(w, e.partition);
  w.Key("queue_ms");
  w.Double(e.queue_ms);
  w.Key("run_ms");
  w.Double(e.run_ms);
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

}  // namespace

WebSocketSession::WebSocketSession(tcp::socket&& socket, std::shared_ptr<StreamService> service, StreamViewer viewer)
    : ws_(std::move(socket)),
      service_(std::move(service)),
      viewer_(std::move(viewer)),
      timer_(ws_.get_executor()),
      kill_timer_(ws_.get_executor()) {}

WebSocketSession::~WebSocketSession() = default;

void WebSocketSession::run(http::request<http::string_body> req) {
  ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  ws_.set_option(websocket::stream_base::decorator(
      [](websocket::response_type& res) { res.set(http::field::server, "tensord"); }));
  ws_.read_message_max(kMaxMessageBytes);
  ws_.text(true);
  // The request is kept alive by the handler until the handshake is done.
  auto owned = std::make_shared<http::request<http::string_body>>(std::move(req));
  ws_.async_accept(*owned, [self = shared_from_this(), owned](beast::error_code ec) { self->on_accept(ec); });
}

void WebSocketSession::on_accept(beast::error_code ec) {
  if (ec) return;  // the socket closes with the last reference
  do_read();
}

void WebSocketSession::do_read() {
  ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, std::size_t n) { self->on_read(ec, n); });
}

void WebSocketSession::on_read(beast::error_code ec, std::size_t) {
  if (ec) {
    // Closed by the peer, by us, or the connection is gone: stop everything.
    closed_ = true;
    closing_ = true;
    timer_.cancel();
    kill_timer_.cancel();
    jobs_.reset();
    return;
  }
  std::string text = beast::buffers_to_string(buffer_.data());
  buffer_.consume(buffer_.size());
  if (!closing_) handle_message(text);
  do_read();
}

void WebSocketSession::fail_subscribe(const std::string& message) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("type");
  w.String("error");
  w.Key("error");
  w.StartObject();
  w.Key("code");
  w.String("bad_request");
  w.Key("message");
  str(w, message);
  w.EndObject();
  w.EndObject();
  send(std::string(sb.GetString(), sb.GetSize()));
  close_after_writes(websocket::close_code::policy_error, "bad subscribe message");
}

void WebSocketSession::handle_message(const std::string& text) {
  rapidjson::Document doc;
  doc.Parse(text.c_str(), text.size());
  if (doc.HasParseError()) {
    return fail_subscribe(std::string("malformed JSON: ") + rapidjson::GetParseError_En(doc.GetParseError()));
  }
  if (!doc.IsObject()) return fail_subscribe("expected an object {\"subscribe\": [...], \"interval_ms\": N}");
  bool metrics = false, jobs = false;
  int interval = kDefaultIntervalMs;
  bool have_subscribe = false;
  for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it) {
    std::string k(it->name.GetString(), it->name.GetStringLength());
    const auto& v = it->value;
    if (k == "subscribe") {
      have_subscribe = true;
      if (!v.IsArray() || v.Empty()) return fail_subscribe("subscribe must be a non-empty array of stream names");
      for (const auto& s : v.GetArray()) {
        if (!s.IsString()) return fail_subscribe("subscribe must be a non-empty array of stream names");
        std::string name(s.GetString(), s.GetStringLength());
        if (name == "metrics") {
          metrics = true;
        } else if (name == "jobs") {
          jobs = true;
        } else {
          return fail_subscribe("unknown stream '" + name + "' (streams: metrics, jobs)");
        }
      }
    } else if (k == "interval_ms") {
      if (!v.IsNumber()) return fail_subscribe("interval_ms must be a number");
      double d = v.GetDouble();
      if (!(d == d)) return fail_subscribe("interval_ms must be a number");
      interval = static_cast<int>(std::clamp(d, double{kMinIntervalMs}, double{kMaxIntervalMs}));
    } else {
      return fail_subscribe("unknown field '" + k + "'");
    }
  }
  if (!have_subscribe) return fail_subscribe("missing 'subscribe'");

  // A later subscribe replaces the earlier one.
  interval_ms_ = interval;
  want_metrics_ = metrics;
  if (jobs && !jobs_) {
    std::weak_ptr<WebSocketSession> weak = shared_from_this();
    jobs_ = EventBus::global().subscribe(kMaxQueuedJobEvents, [weak] {
      if (auto self = weak.lock()) {
        auto ex = self->ws_.get_executor();
        net::post(ex, [self = std::move(self)] { self->drain_jobs(); });
      }
    });
  } else if (!jobs) {
    jobs_.reset();
  }

  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("type");
  w.String("subscribed");
  w.Key("streams");
  w.StartArray();
  if (metrics) w.String("metrics");
  if (jobs) w.String("jobs");
  w.EndArray();
  w.Key("interval_ms");
  w.Int(interval_ms_);
  w.EndObject();
  send(std::string(sb.GetString(), sb.GetSize()));

  timer_.cancel();
  if (want_metrics_) {
    // The first snapshot at once, then one per interval (a fresh timer chain:
    // the cancelled wait sees operation_aborted, or a stale generation).
    ++tick_generation_;
    tick();
  }
}

void WebSocketSession::tick() {
  if (closing_ || !want_metrics_) return;
  send(service_->metrics_snapshot(viewer_));
  timer_.expires_after(std::chrono::milliseconds(interval_ms_));
  timer_.async_wait([self = shared_from_this(), gen = tick_generation_](beast::error_code ec) {
    if (ec || gen != self->tick_generation_) return;
    self->tick();
  });
}

void WebSocketSession::drain_jobs() {
  if (!jobs_ || closing_) return;
  bool overflowed = false;
  auto events = jobs_->drain(overflowed);
  if (overflowed) return close_after_writes(websocket::close_code::policy_error, "slow consumer");
  for (const auto& e : events) {
    if (viewer_.see_all || e.tenant == viewer_.tenant) send(job_event_json(e));
    if (closing_) return;
  }
}

void WebSocketSession::send(std::string message) {
  if (closing_) return;
  if (queue_.size() >= kMaxQueuedMessages) {
    return close_after_writes(websocket::close_code::policy_error, "slow consumer");
  }
  queue_.push_back(std::move(message));
  if (!writing_) do_write();
}

void WebSocketSession::do_write() {
  writing_ = true;
  ws_.async_write(net::buffer(queue_.front()),
                  [self = shared_from_this()](beast::error_code ec, std::size_t n) { self->on_write(ec, n); });
}

void WebSocketSession::on_write(beast::error_code ec, std::size_t) {
  writing_ = false;
  if (!queue_.empty()) queue_.pop_front();
  if (ec) {
    closed_ = true;
    closing_ = true;
    queue_.clear();
    timer_.cancel();
    kill_timer_.cancel();
    jobs_.reset();
    return;
  }
  if (!queue_.empty()) return do_write();
  if (closing_ && !closed_) do_close();
}

void WebSocketSession::close_after_writes(websocket::close_code code, std::string reason) {
  if (closing_) return;
  closing_ = true;
  want_metrics_ = false;
  timer_.cancel();
  jobs_.reset();
  close_reason_ = websocket::close_reason(code, reason);
  if (reason == "slow consumer") {
    // Drop what waits (the write in flight, if any, stays: Beast owns it).
    while (queue_.size() > (writing_ ? 1u : 0u)) queue_.pop_back();
  }
  // A peer that never reads would hold the close forever: cut it off.
  kill_timer_.expires_after(kCloseTimeout);
  kill_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec) return;
    beast::error_code ignored;
    beast::get_lowest_layer(self->ws_).socket().close(ignored);
  });
  if (!writing_) do_close();
}

void WebSocketSession::do_close() {
  closed_ = true;
  ws_.async_close(close_reason_, [self = shared_from_this()](beast::error_code) {
    // The pending read completes with `closed` once the peer answers.
  });
}

}  // namespace tensord
