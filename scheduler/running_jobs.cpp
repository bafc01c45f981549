#include "scheduler/running_jobs.h"

#include <algorithm>
#include <vector>

#include "scheduler/job.h"

namespace tensord {

void RunningJobs::add(const std::shared_ptr<Job>& job, Clock::time_point start) {
  std::lock_guard<std::mutex> lk(mu_);
  jobs_[job.get()] = Entry{job, start};
}

double RunningJobs::remove(const Job& job, Clock::time_point end) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = jobs_.find(&job);
  if (it == jobs_.end()) return 0;
  const double s = std::chrono::duration<double>(end - it->second.counted_until).count();
  jobs_.erase(it);
  return std::max(0.0, s);
}

size_t RunningJobs::cancel_all(const Error& why) {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [p, e] : jobs_) jobs.push_back(e.job);
  }
  for (const auto& j : jobs) j->request_cancel(why);  // outside the lock: it takes the job's
  return jobs.size();
}

void RunningJobs::flush_busy(Clock::time_point now, const BusyFn& fn) {
  struct Due {
    std::string tenant, partition;
    double s;
  };
  std::vector<Due> due;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [p, e] : jobs_) {
      if (now <= e.counted_until) continue;
      due.push_back(
          {e.job->tenant(), e.job->partition(), std::chrono::duration<double>(now - e.counted_until).count()});
      e.counted_until = now;
    }
  }
  for (const auto& d : due) fn(d.tenant, d.partition, d.s);
}

size_t RunningJobs::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return jobs_.size();
}

}  // namespace tensord
