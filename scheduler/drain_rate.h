// Completions per second of a queue, as an EWMA of the intervals between
// completions. An interval counts only when the queue had work (queued or
// running) throughout it, so idle gaps do not read as a slow drain.
// Not thread-safe (owned by FairQueue).
#pragma once

#include "scheduler/clock.h"

namespace tensord {

class DrainRate {
 public:
  // A completion at `now`; `busy_after`: work is still queued or running.
  void completed(Clock::time_point now, bool busy_after);
  // The busy flag changed without a completion (work arrived at an idle
  // queue): the next interval starts now, not at the last completion.
  void became_busy(Clock::time_point now);
  // The queue emptied without a completion (cancel, expiry).
  void became_idle() { busy_since_last_ = false; }
  bool known() const { return samples_ > 0; }
  double per_second() const;  // 0 when unknown

 private:
  static constexpr double kAlpha = 0.2;
  double interval_s_ = 0;
  long samples_ = 0;
  Clock::time_point last_{};
  bool have_last_ = false;
  bool busy_since_last_ = false;
};

}  // namespace tensord
