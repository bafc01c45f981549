// The jobs running right now, for the two things that need them while they
// run: a drain that cancels what is still running at its deadline, and
// tensord_tenant_busy_seconds_total, which advances during a long job
// instead of jumping at its end. Thread-safe (one mutex; held briefly).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "ops/error.h"

namespace tensord {

class Job;

class RunningJobs {
 public:
  using Clock = std::chrono::steady_clock;
  // Busy time not yet counted: (tenant, partition, seconds).
  using BusyFn = std::function<void(const std::string&, const std::string&, double)>;

  // A job started running at `start`.
  void add(const std::shared_ptr<Job>& job, Clock::time_point start);
  // The job ended at `end`: it leaves the set; returns its busy seconds not
  // yet counted by flush_busy (all of them when never flushed; 0 when the
  // job was not in the set).
  double remove(const Job& job, Clock::time_point end);
  // Requests cancellation of every running job with `why` (each stops at its
  // next node boundary); returns how many were asked.
  size_t cancel_all(const Error& why);
  // Hands each running job's busy time since the last flush to `fn`.
  void flush_busy(Clock::time_point now, const BusyFn& fn);
  size_t size() const;

 private:
  struct Entry {
    std::shared_ptr<Job> job;
    Clock::time_point counted_until;
  };
  mutable std::mutex mu_;
  std::unordered_map<const Job*, Entry> jobs_;
};

}  // namespace tensord
