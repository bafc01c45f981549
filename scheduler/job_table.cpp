#include "scheduler/job_table.h"

namespace tensord {

void JobTable::add(const std::shared_ptr<Job>& job) {
  std::lock_guard<std::mutex> lk(mu_);
  collect_locked(Job::Clock::now());
  jobs_[job->id()] = job;
  order_[job->tenant()].push_back(job->id());
}

std::shared_ptr<Job> JobTable::find(const std::string& tenant, const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  collect_locked(Job::Clock::now());
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second->tenant() != tenant) return nullptr;
  return it->second;
}

size_t JobTable::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return jobs_.size();
}

void JobTable::collect_locked(Job::Clock::time_point now) {
  for (auto& [tenant, ids] : order_) {
    size_t finished = 0;
    for (const auto& id : ids) {
      auto it = jobs_.find(id);
      if (it != jobs_.end() && is_final(it->second->state())) ++finished;
    }
    for (auto it = ids.begin(); it != ids.end();) {
      auto j = jobs_.find(*it);
      if (j == jobs_.end()) {
        it = ids.erase(it);
        continue;
      }
      const Job& job = *j->second;
      bool done = is_final(job.state());
      bool expired = done && now - job.ended_at() > retention_;
      bool excess = done && finished > max_finished_;
      if (expired || excess) {
        jobs_.erase(j);
        it = ids.erase(it);
        --finished;
      } else {
        ++it;
      }
    }
  }
}

}  // namespace tensord
