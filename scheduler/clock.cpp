#include "scheduler/clock.h"

namespace tensord {

Clock::time_point ManualClock::now() const {
  std::lock_guard<std::mutex> lk(mu_);
  return now_;
}

void ManualClock::advance(std::chrono::steady_clock::duration d) {
  std::lock_guard<std::mutex> lk(mu_);
  now_ += d;
}

void ManualClock::advance_seconds(double s) {
  advance(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s)));
}

void ManualClock::set(time_point t) {
  std::lock_guard<std::mutex> lk(mu_);
  now_ = t;
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace tensord
