#include "scheduler/drain_rate.h"

#include <algorithm>

namespace tensord {

void DrainRate::completed(Clock::time_point now, bool busy_after) {
  if (have_last_ && busy_since_last_) {
    const double dt = std::max(seconds_between(last_, now), 1e-6);
    interval_s_ = samples_ == 0 ? dt : kAlpha * dt + (1 - kAlpha) * interval_s_;
    ++samples_;
  }
  last_ = now;
  have_last_ = true;
  busy_since_last_ = busy_after;
}

void DrainRate::became_busy(Clock::time_point now) {
  if (busy_since_last_) return;
  // The interval to the next completion measures work done from now on.
  last_ = now;
  have_last_ = true;
  busy_since_last_ = true;
}

double DrainRate::per_second() const {
  return samples_ > 0 ? 1.0 / interval_s_ : 0.0;
}

}  // namespace tensord
