#include "server/io_deadline.h"

#include <utility>

namespace tensord {

struct IoDeadline::State : std::enable_shared_from_this<State> {
  State(const net::any_io_executor& ex, std::function<void()> cb) : timer(ex), expired(std::move(cb)) {}

  net::steady_timer timer;
  std::function<void()> expired;
  Clock::time_point deadline = Clock::time_point::max();  // max: none
  Clock::time_point armed = Clock::time_point::max();     // when the pending wait ends; max: none pending
  uint64_t generation = 0;                                // of the pending wait (a replaced one is stale)
  uint64_t arms = 0;

  void arm(Clock::time_point at) {
    if (armed <= at) return;  // the pending wait ends first and re-arms for the rest
    armed = at;
    ++arms;
    timer.expires_at(at);  // cancels a later wait: its handler sees a stale generation
    timer.async_wait([weak = weak_from_this(), g = ++generation](const beast::error_code& ec) {
      if (auto self = weak.lock()) self->on_timer(g, ec);
    });
  }

  void on_timer(uint64_t g, const beast::error_code& ec) {
    if (g != generation) return;  // replaced by an earlier deadline's wait
    armed = Clock::time_point::max();
    if (ec || deadline == Clock::time_point::max()) return;
    if (Clock::now() >= deadline) {
      deadline = Clock::time_point::max();
      expired();
      return;
    }
    arm(deadline);
  }
};

IoDeadline::IoDeadline(const net::any_io_executor& ex, std::function<void()> expired)
    : state_(std::make_shared<State>(ex, std::move(expired))) {}

IoDeadline::~IoDeadline() {
  // The pending wait's handler finds the state gone (it holds it weakly);
  // cancelling only hurries it.
  try {
    state_->timer.cancel();
  } catch (...) {  // NOLINT(bugprone-empty-catch): nothing to cancel then
  }
}

void IoDeadline::after(Clock::duration d) {
  state_->deadline = Clock::now() + d;
  state_->arm(state_->deadline);
}

void IoDeadline::never() {
  state_->deadline = Clock::time_point::max();
}

uint64_t IoDeadline::arms() const {
  return state_->arms;
}

}  // namespace tensord
