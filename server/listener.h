// Accepts connections and starts an HttpSession on each, with its own strand
// on one of the io threads' io_contexts (Beast chat-multi's listener). Included by server/*.cpp only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "server/beast.h"

namespace tensord {

struct ServerState;

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  // Opens, binds and listens on `ioc`; each accepted connection goes to the
  // next of `sessions` in turn (an io_context per io thread). Throws
  // boost::system::system_error.
  Listener(net::io_context& ioc, const tcp::endpoint& endpoint, std::shared_ptr<ServerState> state,
           std::vector<net::io_context*> sessions);

  uint16_t port() const { return port_; }

  // Starts the accept loop.
  void run();

  // Closes the acceptor: no new connections. Thread-safe, idempotent.
  void stop();

 private:
  void do_accept();
  void on_accept(beast::error_code ec, tcp::socket socket);

  std::vector<net::io_context*> sessions_;
  size_t next_ = 0;         // the io_context of the next connection (on the acceptor's strand)
  tcp::acceptor acceptor_;  // on its own strand
  net::steady_timer retry_timer_;
  std::shared_ptr<ServerState> state_;
  uint16_t port_ = 0;
};

}  // namespace tensord
