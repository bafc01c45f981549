#include "server/http_server.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <latch>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "metrics/log.h"
#include "ops/cpu/thread_pool.h"
#include "server/beast.h"
#include "server/http_metrics.h"
#include "server/listener.h"
#include "server/router.h"
#include "server/server_state.h"

namespace tensord {
namespace {

constexpr std::chrono::milliseconds kDrainPoll{5};

int resolve_threads(int requested) {
  if (requested > 0) return requested;
  return std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
}

tcp::endpoint resolve_endpoint(net::io_context& ioc, const std::string& host, uint16_t port) {
  beast::error_code ec;
  auto address = net::ip::make_address(host, ec);
  if (!ec) return {address, port};
  tcp::resolver resolver(ioc);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) {
    throw std::runtime_error("listen on " + host + ":" + std::to_string(port) +
                             ": cannot resolve host: " + ec.message());
  }
  return results.begin()->endpoint();
}

}  // namespace

struct HttpServer::Impl {
  // Declared before the io_context: queued handlers (sessions) that die with
  // the io_context still reach the state.
  std::shared_ptr<ServerState> state = std::make_shared<ServerState>();
  DrainHooks hooks;
  int threads = 2;
  std::atomic<bool> ran{false};
  int signals_seen = 0;  // on the control strand
  std::chrono::steady_clock::time_point drain_deadline;
  bool expired = false;  // the drain's timeout passed: cancelling
  std::chrono::steady_clock::time_point grace_deadline;

  // One io_context per io thread, each run by its thread alone: a
  // connection lives on one of them (round robin at accept) and its
  // completions are handled on the thread where they arrive. One
  // io_context run by several threads woke a second thread and interrupted
  // epoll on nearly every completion (futex and epoll_ctl were half of a
  // tiny request's system calls). The first one also serves the acceptor,
  // the control strand and the signals.
  std::vector<std::unique_ptr<net::io_context>> iocs;
  net::io_context& ioc;
  // Each runs until stop_all(), with or without a connection.
  std::vector<net::executor_work_guard<net::io_context::executor_type>> keep_running;
  // Server control (signals, drain) is serialized on one strand.
  net::strand<net::io_context::executor_type> control{net::make_strand(ioc)};
  net::signal_set signals{control, SIGINT, SIGTERM};
  net::steady_timer drain_timer{control};
  std::shared_ptr<Listener> listener;
  // Declared after the io_context so they are destroyed (joined) first.
  std::unique_ptr<net::thread_pool> handlers;
  std::map<std::string, std::unique_ptr<net::thread_pool>> lanes;  // set_lanes

  explicit Impl(int threads_hint) : threads(resolve_threads(threads_hint)), iocs(make_iocs(threads)), ioc(*iocs[0]) {
    keep_running.reserve(iocs.size());
    for (auto& c : iocs) keep_running.push_back(net::make_work_guard(*c));
  }

  static std::vector<std::unique_ptr<net::io_context>> make_iocs(int n) {
    std::vector<std::unique_ptr<net::io_context>> out;
    out.reserve(static_cast<size_t>(n));
    // Concurrency hint 1: run by one thread; other threads still post to it.
    for (int i = 0; i < n; ++i) out.push_back(std::make_unique<net::io_context>(1));
    return out;
  }

  void stop_all() {
    for (auto& c : iocs) c->stop();
  }

  std::vector<net::io_context*> session_contexts() {
    std::vector<net::io_context*> out;
    out.reserve(iocs.size());
    for (auto& c : iocs) out.push_back(c.get());
    return out;
  }

  void wait_signal() {
    signals.async_wait([this](beast::error_code ec, int sig) {
      if (ec) return;
      ++signals_seen;
      if (!state->draining.load()) {
        log::info("signal: draining", {{"signal", sig},
                                       {"drain_timeout_s", static_cast<int64_t>(state->options.drain_timeout.count())},
                                       {"requests", state->inflight.load()},
                                       {"jobs", busy()}});
        begin_drain();
      } else if (signals_seen == 2) {
        log::warn("second signal: cancelling what runs now", {{"signal", sig}});
        drain_deadline = std::chrono::steady_clock::now();  // poll_drain expires it at its next tick
      } else {
        log::warn("third signal: stopping now", {{"signal", sig}});
        stop_all();
        return;
      }
      wait_signal();
    });
  }

  template <class F>
  void call_hook(const char* what, F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      log::error(std::string("drain ") + what + " failed", {{"error", e.what()}});
    }
  }

  size_t busy() {
    size_t n = 0;
    if (hooks.busy) call_hook("busy", [&] { n = hooks.busy(); });
    return n;
  }

  // On the control strand.
  void begin_drain() {
    if (state->draining.exchange(true)) return;
    listener->stop();
    if (hooks.begin) call_hook("begin", hooks.begin);
    drain_deadline = std::chrono::steady_clock::now() + state->options.drain_timeout;
    poll_drain();
  }

  void poll_drain() {
    const size_t requests = state->inflight.load();
    const size_t work = busy();
    if (requests == 0 && work == 0) {
      log::info("drained", {{"expired", expired}});
      stop_all();
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!expired && now >= drain_deadline) {
      expired = true;
      grace_deadline = now + kCancelGrace;
      log::warn("drain timeout: cancelling what still runs", {{"requests", requests}, {"jobs", work}});
    }
    if (expired) {
      // Again on every tick: a job that started running meanwhile is caught.
      if (hooks.expire) call_hook("expire", hooks.expire);
      if (now >= grace_deadline) {
        log::warn("still in flight after cancelling: stopping",
                  {{"requests", requests}, {"jobs", work}, {"grace_s", static_cast<int64_t>(kCancelGrace.count())}});
        stop_all();
        return;
      }
    }
    drain_timer.expires_after(kDrainPoll);
    drain_timer.async_wait([this](beast::error_code ec) {
      if (!ec) poll_drain();
    });
  }

  void run_io(net::io_context& c) {
    // A handler that throws must not take the server down: log and go on.
    for (;;) {
      try {
        c.run();
        return;
      } catch (const std::exception& e) {
        log::error("io thread: exception", {{"error", e.what()}});
      } catch (...) {
        log::error("io thread: unknown exception");
      }
    }
  }
};

HttpServer::HttpServer(ServerOptions options, std::shared_ptr<const Router> router)
    : impl_(std::make_unique<Impl>(options.io_threads)) {
  if (!router) throw std::invalid_argument("HttpServer: null router");
  auto& state = *impl_->state;
  state.options = std::move(options);
  state.options.io_threads = impl_->threads;
  state.router = std::move(router);
  state.metrics = state.options.record_metrics ? &HttpMetrics::global() : nullptr;
  impl_->handlers =
      std::make_unique<net::thread_pool>(static_cast<std::size_t>(std::max(1, state.options.handler_threads)));
  // The lane a request's caller names; null for none or an unknown lane
  // (no or a bad token: the handler answers 401).
  state.lane_pool = [impl = impl_.get()](std::string_view lane) -> net::thread_pool* {
    if (impl->lanes.empty() || lane.empty()) return nullptr;
    auto it = impl->lanes.find(std::string(lane));
    return it == impl->lanes.end() ? nullptr : it->second.get();
  };
  state.offload_as = [impl = impl_.get(), lane_pool = state.lane_pool](std::string_view lane,
                                                                       std::function<void()> task) {
    net::thread_pool* pool = lane_pool(lane);
    net::post(pool != nullptr ? *pool : *impl->handlers, std::move(task));
  };
  auto endpoint = resolve_endpoint(impl_->ioc, state.options.host, state.options.port);
  try {
    impl_->listener = std::make_shared<Listener>(impl_->ioc, endpoint, impl_->state, impl_->session_contexts());
  } catch (const std::exception& e) {
    throw std::runtime_error("listen on " + state.options.host + ":" + std::to_string(state.options.port) + ": " +
                             e.what());
  }
}

HttpServer::~HttpServer() = default;

uint16_t HttpServer::port() const {
  return impl_->listener->port();
}

bool HttpServer::draining() const {
  return impl_->state->draining.load();
}

size_t HttpServer::inflight() const {
  return impl_->state->inflight.load();
}

void HttpServer::request_stop() {
  net::post(impl_->control, [impl = impl_.get()] { impl->begin_drain(); });
}

void HttpServer::set_drain_hooks(DrainHooks hooks) {
  impl_->hooks = std::move(hooks);
}

void HttpServer::set_on_drain(std::function<void()> on_drain) {
  impl_->hooks = DrainHooks{std::move(on_drain), {}, {}};
}

void HttpServer::set_callers(std::function<std::shared_ptr<const Caller>(std::string_view authorization)> resolve,
                             std::function<uint64_t()> generation) {
  if (impl_->ran.load()) throw std::logic_error("HttpServer::set_callers after run");
  impl_->state->callers_generation = std::move(generation);
  impl_->state->resolve = [resolve = std::move(resolve)](std::string_view authorization) {
    try {
      return resolve(authorization);
    } catch (...) {
      return std::shared_ptr<const Caller>();  // as no caller: the route answers 401
    }
  };
}

void HttpServer::set_lanes(const std::map<std::string, Lane>& lanes) {
  if (impl_->ran.load()) throw std::logic_error("HttpServer::set_lanes after run");
  for (auto& [name, lane] : lanes) {
    const int n = std::max(1, lane.threads);
    auto pool = std::make_unique<net::thread_pool>(static_cast<std::size_t>(n));
    if (!lane.cpus.empty()) {
      // Each of the pool's threads takes one of these tasks (each waits for
      // all n to have started) and pins itself to the lane's cores at the
      // partition threads' nice. The latch is shared: a thread may still be
      // leaving its wait after this function returned.
      auto started = std::make_shared<std::latch>(n);
      for (int i = 0; i < n; ++i) {
        net::post(*pool, [started, cpus = lane.cpus] {
          pin_current_thread(cpus);
          yield_to_io_threads();
          started->arrive_and_wait();
        });
      }
      started->wait();
    }
    impl_->lanes[name] = std::move(pool);
  }
}

void HttpServer::set_stream_service(std::shared_ptr<StreamService> streams) {
  impl_->state->streams = std::move(streams);
}

void HttpServer::run() {
  if (impl_->ran.exchange(true)) throw std::logic_error("HttpServer::run called twice");
  impl_->listener->run();
  impl_->wait_signal();
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(impl_->threads - 1));
  for (int i = 1; i < impl_->threads; ++i) {
    pool.emplace_back([impl = impl_.get(), i] { impl->run_io(*impl->iocs[static_cast<size_t>(i)]); });
  }
  impl_->run_io(impl_->ioc);
  for (auto& t : pool) t.join();
  impl_->handlers->join();
  // A lane also runs its tenant's connections (HttpSession::move_to_lane):
  // kept-alive ones would hold join() until their idle timeout.
  for (auto& [name, lane] : impl_->lanes) {
    lane->stop();
    lane->join();
  }
  // Restore default signal dispositions: after run() a signal ends the process.
  beast::error_code ec;
  impl_->signals.clear(ec);
}

}  // namespace tensord
