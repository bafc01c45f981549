#include "server/listener.h"

#include <chrono>
#include <utility>

#include "metrics/log.h"
#include "server/http_session.h"
#include "server/server_state.h"

namespace tensord {

Listener::Listener(net::io_context& ioc, const tcp::endpoint& endpoint, std::shared_ptr<ServerState> state,
                   std::vector<net::io_context*> sessions)
    : sessions_(std::move(sessions)),
      acceptor_(net::make_strand(ioc)),
      retry_timer_(acceptor_.get_executor()),
      state_(std::move(state)) {
  if (sessions_.empty()) sessions_.push_back(&ioc);
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(net::socket_base::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen(net::socket_base::max_listen_connections);
  port_ = acceptor_.local_endpoint().port();
}

void Listener::run() {
  net::dispatch(acceptor_.get_executor(), [self = shared_from_this()] { self->do_accept(); });
}

void Listener::stop() {
  net::post(acceptor_.get_executor(), [self = shared_from_this()] {
    beast::error_code ec;
    self->acceptor_.close(ec);
    self->retry_timer_.cancel();
  });
}

void Listener::do_accept() {
  if (!acceptor_.is_open()) return;
  // Each connection gets its own strand (its handlers never run
  // concurrently), on the io threads in turn.
  net::io_context& home = *sessions_[next_++ % sessions_.size()];
  acceptor_.async_accept(net::make_strand(home), [self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
    self->on_accept(ec, std::move(socket));
  });
}

void Listener::on_accept(beast::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;  // stopped
  if (ec) {
    // E.g. EMFILE: out of descriptors. Back off instead of spinning.
    log::warn("accept failed", {{"error", ec.message()}});
    retry_timer_.expires_after(std::chrono::milliseconds(50));
    retry_timer_.async_wait([self = shared_from_this()](beast::error_code wait_ec) {
      if (!wait_ec) self->do_accept();
    });
    return;
  }
  beast::error_code opt_ec;
  socket.set_option(tcp::no_delay(true), opt_ec);  // small responses go out at once
  std::make_shared<HttpSession>(std::move(socket), state_)->run();
  do_accept();
}

}  // namespace tensord
