// Time source for the scheduler, injectable so scheduling is tested without
// sleeps: SteadyClock in the server, ManualClock in tests. All three are
// thread-safe.
#pragma once

#include <chrono>
#include <mutex>

namespace tensord {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual time_point now() const = 0;
  // True when time advances by itself, so a timer thread may sleep until a
  // deadline; false for ManualClock (tests call JobScheduler::poll()).
  virtual bool realtime() const { return true; }
};

class SteadyClock final : public Clock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }
};

// Time moves only when advance() or set() is called.
class ManualClock final : public Clock {
 public:
  // Starts one hour after the epoch so `now() - x` never underflows.
  explicit ManualClock(time_point start = time_point{} + std::chrono::hours(1)) : now_(start) {}

  time_point now() const override;
  bool realtime() const override { return false; }
  void advance(std::chrono::steady_clock::duration d);
  void advance_seconds(double s);
  void set(time_point t);

 private:
  mutable std::mutex mu_;
  time_point now_;
};

// Seconds from a to b (negative when b is before a).
double seconds_between(Clock::time_point a, Clock::time_point b);

}  // namespace tensord
