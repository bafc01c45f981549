// The jobs a server remembers for GET /v1/jobs/{id}: every live job, and
// finished ones for `retention` or until a tenant has more than
// `max_finished` (oldest dropped first). Results hold tensors charged to the
// tenant, so the bound is also a memory bound. Thread-safe.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "scheduler/job.h"

namespace tensord {

class JobTable {
 public:
  explicit JobTable(std::chrono::seconds retention = std::chrono::seconds(600), size_t max_finished = 256)
      : retention_(retention), max_finished_(max_finished) {}

  void add(const std::shared_ptr<Job>& job);
  // The job if it exists and belongs to `tenant`; nullptr otherwise (a job
  // of another tenant is indistinguishable from an unknown one).
  std::shared_ptr<Job> find(const std::string& tenant, const std::string& id);
  size_t size() const;

 private:
  void collect_locked(Job::Clock::time_point now);

  const std::chrono::seconds retention_;
  const size_t max_finished_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;
  std::map<std::string, std::deque<std::string>> order_;  // tenant -> ids, oldest first
};

}  // namespace tensord
