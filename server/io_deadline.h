// A connection's I/O deadline: when it passes, `expired` runs (the session
// cancels the socket's pending operation). Moving it costs a clock read,
// not a system call: the one timer stays armed for the time it was given
// and, when it fires before the deadline (which moved later meanwhile), is
// armed again for what is left. Beast's tcp_stream re-armed its timer for
// every read and write: a timerfd_settime and a cancelled wait's handler
// per request. One object per connection, used on the socket's strand;
// its timer's handler holds it only weakly (a session that ends with a
// wait pending is gone at once).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "server/beast.h"

namespace tensord {

class IoDeadline {
 public:
  using Clock = std::chrono::steady_clock;

  // `expired` runs on `ex`, once per deadline that passes.
  IoDeadline(const net::any_io_executor& ex, std::function<void()> expired);
  ~IoDeadline();
  IoDeadline(const IoDeadline&) = delete;
  IoDeadline& operator=(const IoDeadline&) = delete;

  // The deadline is `d` from now (replacing the last one).
  void after(Clock::duration d);
  // No deadline until the next after().
  void never();

  // How many times the timer was armed (tests: not once per after()).
  uint64_t arms() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace tensord
