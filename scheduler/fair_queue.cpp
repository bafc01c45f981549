#include "scheduler/fair_queue.h"

#include <algorithm>
#include <cmath>

#include "ops/error.h"
#include "scheduler/queue_full_error.h"

namespace tensord {

namespace {
constexpr double kDefaultEstimateS = 0.01;  // charge before any run time is measured
constexpr double kEstimateAlpha = 0.2;
constexpr double kDefaultDrainPerS = 1.0;

void update_estimate(double& est, bool& known, double sample) {
  est = known ? kEstimateAlpha * sample + (1 - kEstimateAlpha) * est : sample;
  known = true;
}
}  // namespace

FairQueue::FairQueue(std::vector<PartitionSpec> partitions, std::vector<TenantSpec> tenants)
    : partition_specs_(std::move(partitions)), tenant_specs_(std::move(tenants)) {
  for (const auto& p : partition_specs_) {
    TENSORD_CHECK(!p.name.empty(), kInvalidArgument, "partition without a name");
    TENSORD_CHECK(p.workqueue_limit >= 1, kInvalidArgument, "partition '" + p.name + "': workqueue_limit must be >= 1");
    TENSORD_CHECK(p.share > 0, kInvalidArgument, "partition '" + p.name + "': share must be > 0");
    TENSORD_CHECK(partition_index_.emplace(p.name, partitions_.size()).second, kInvalidArgument,
                  "partition '" + p.name + "' is defined twice");
    Partition st;
    st.spec = p;
    partitions_.push_back(std::move(st));
  }
  for (const auto& t : tenant_specs_) {
    const size_t part = checked_partition_of(t);
    TENSORD_CHECK(tenant_index_.emplace(t.name, tenants_.size()).second, kInvalidArgument,
                  "tenant '" + t.name + "' is defined twice");
    Tenant st;
    st.spec = t;
    st.partition = part;
    partitions_[part].tenants.push_back(tenants_.size());
    tenants_.push_back(std::move(st));
  }
}

size_t FairQueue::checked_partition_of(const TenantSpec& t) const {
  auto it = partition_index_.find(t.partition);
  TENSORD_CHECK(it != partition_index_.end(), kInvalidArgument,
                "tenant '" + t.name + "': unknown partition '" + t.partition + "'");
  TENSORD_CHECK(t.weight > 0, kInvalidArgument, "tenant '" + t.name + "': weight must be > 0");
  TENSORD_CHECK(t.max_queued >= 0 && t.max_running >= 1, kInvalidArgument,
                "tenant '" + t.name + "': max_queued must be >= 0 and max_running >= 1");
  return it->second;
}

FairQueue::Tenant& FairQueue::tenant_state(const std::string& name) {
  return const_cast<Tenant&>(std::as_const(*this).tenant_state(name));
}

const FairQueue::Tenant& FairQueue::tenant_state(const std::string& name) const {
  auto it = tenant_index_.find(name);
  if (it == tenant_index_.end()) throw Error(ErrorCode::kInternal, "scheduler: unknown tenant '" + name + "'");
  return tenants_[it->second];
}

FairQueue::Partition& FairQueue::partition_state(const std::string& name) {
  return const_cast<Partition&>(std::as_const(*this).partition_state(name));
}

const FairQueue::Partition& FairQueue::partition_state(const std::string& name) const {
  auto it = partition_index_.find(name);
  if (it == partition_index_.end()) throw Error(ErrorCode::kInternal, "scheduler: unknown partition '" + name + "'");
  return partitions_[it->second];
}

void FairQueue::reconfigure(const std::vector<PartitionSpec>& partitions, const std::vector<TenantSpec>& tenants) {
  std::unordered_map<std::string, size_t> listed;
  for (const auto& p : partitions) {
    auto it = partition_index_.find(p.name);
    TENSORD_CHECK(it != partition_index_.end(), kInvalidArgument,
                  "partition '" + p.name + "' is new: partitions cannot be added without a restart");
    TENSORD_CHECK(p.workqueue_limit >= 1, kInvalidArgument, "partition '" + p.name + "': workqueue_limit must be >= 1");
  }
  for (const auto& t : tenants) {
    const size_t part = checked_partition_of(t);
    TENSORD_CHECK(listed.emplace(t.name, 0).second, kInvalidArgument, "tenant '" + t.name + "' is defined twice");
    auto known = tenant_index_.find(t.name);
    TENSORD_CHECK(known == tenant_index_.end() || tenants_[known->second].partition == part, kInvalidArgument,
                  "tenant '" + t.name + "' cannot move to partition '" + t.partition + "'");
  }
  // Valid: apply.
  for (const auto& p : partitions) {
    size_t pi = partition_index_.at(p.name);
    partitions_[pi].spec.workqueue_limit = p.workqueue_limit;
    for (auto& ps : partition_specs_) {
      if (ps.name == p.name) ps.workqueue_limit = p.workqueue_limit;
    }
  }
  for (auto& t : tenants_) t.removed = !listed.count(t.spec.name);
  for (const auto& spec : tenants) {
    auto known = tenant_index_.find(spec.name);
    if (known != tenant_index_.end()) {
      tenants_[known->second].spec = spec;
      continue;
    }
    const size_t pi = partition_index_.at(spec.partition);
    Tenant st;
    st.spec = spec;
    st.partition = pi;
    st.vtime = partitions_[pi].vclock;  // joins now: no credit for the past
    tenant_index_.emplace(spec.name, tenants_.size());
    partitions_[pi].tenants.push_back(tenants_.size());
    tenants_.push_back(std::move(st));
  }
  tenant_specs_ = tenants;
}

void FairQueue::push(QueuedJob job) {
  Tenant& t = tenant_state(job.tenant);
  if (t.removed) {
    throw Error(ErrorCode::kUnauthenticated, "tenant '" + job.tenant + "' was removed from the configuration");
  }
  if (queued_index_.count(job.id) || charged_.count(job.id))
    throw Error(ErrorCode::kInternal, "scheduler: job " + std::to_string(job.id) + " is already scheduled");
  if (static_cast<int64_t>(t.queue.size()) >= t.spec.max_queued) {
    throw QueueFullError("tenant '" + t.spec.name + "' has " + std::to_string(t.queue.size()) +
                             " jobs queued (max_queued " + std::to_string(t.spec.max_queued) + ")",
                         retry_after_seconds(t.spec.name));
  }
  Partition& p = partitions_[t.partition];
  if (t.queue.empty()) {
    t.vtime = std::max(t.vtime, p.vclock);  // idle time banks no credit
    if (t.running == 0) t.drain.became_busy(job.enqueued);
  }
  if (p.queued == 0 && p.inflight == 0) p.drain.became_busy(job.enqueued);
  const Key key{-static_cast<int64_t>(job.priority), seq_++};
  const size_t ti = tenant_index_.at(job.tenant);
  queued_index_.emplace(job.id, std::make_pair(ti, key));
  if (job.deadline != Clock::time_point::max()) deadlines_.emplace(job.deadline, job.id);
  t.queue.emplace(key, std::move(job));
  ++p.queued;
}

double FairQueue::estimate(const Tenant& t) const {
  if (t.est_known) return t.est_run_s;
  const Partition& p = partitions_[t.partition];
  return p.est_known ? p.est_run_s : kDefaultEstimateS;
}

std::optional<QueuedJob> FairQueue::pop(const std::string& partition, Clock::time_point now) {
  Partition& p = partition_state(partition);
  if (p.inflight >= p.spec.workqueue_limit) return std::nullopt;
  Tenant* best = nullptr;
  for (size_t ti : p.tenants) {
    Tenant& t = tenants_[ti];
    if (t.queue.empty() || t.running >= t.spec.max_running) continue;
    if (!best || t.vtime < best->vtime) best = &t;
  }
  if (!best) return std::nullopt;
  auto node = best->queue.extract(best->queue.begin());
  QueuedJob job = std::move(node.mapped());
  queued_index_.erase(job.id);
  if (job.deadline != Clock::time_point::max()) deadlines_.erase({job.deadline, job.id});
  --p.queued;
  ++p.inflight;
  ++best->running;
  p.vclock = std::max(p.vclock, best->vtime);
  const double est = estimate(*best);
  best->vtime += est / best->spec.weight;
  charged_.emplace(job.id, est);
  return job;
}

void FairQueue::finished(const QueuedJob& job, Clock::time_point now, double run_seconds) {
  auto it = charged_.find(job.id);
  if (it == charged_.end())
    throw Error(ErrorCode::kInternal, "scheduler: job " + std::to_string(job.id) + " is not running");
  Tenant& t = tenant_state(job.tenant);
  Partition& p = partitions_[t.partition];
  run_seconds = std::max(run_seconds, 0.0);
  t.vtime += (run_seconds - it->second) / t.spec.weight;
  charged_.erase(it);
  --t.running;
  --p.inflight;
  t.busy_s += run_seconds;
  p.busy_s += run_seconds;
  ++t.completed;
  update_estimate(t.est_run_s, t.est_known, run_seconds);
  update_estimate(p.est_run_s, p.est_known, run_seconds);
  t.drain.completed(now, t.running > 0 || !t.queue.empty());
  p.drain.completed(now, p.inflight > 0 || p.queued > 0);
}

QueuedJob FairQueue::remove_queued(uint64_t id) {
  auto it = queued_index_.find(id);
  Tenant& t = tenants_[it->second.first];
  auto node = t.queue.extract(it->second.second);
  queued_index_.erase(it);
  QueuedJob job = std::move(node.mapped());
  if (job.deadline != Clock::time_point::max()) deadlines_.erase({job.deadline, job.id});
  Partition& p = partitions_[t.partition];
  --p.queued;
  if (t.queue.empty() && t.running == 0) t.drain.became_idle();
  if (p.queued == 0 && p.inflight == 0) p.drain.became_idle();
  return job;
}

std::optional<QueuedJob> FairQueue::cancel(uint64_t id) {
  if (!queued_index_.count(id)) return std::nullopt;
  return remove_queued(id);
}

std::vector<QueuedJob> FairQueue::expire(Clock::time_point now) {
  std::vector<QueuedJob> out;
  while (!deadlines_.empty() && deadlines_.begin()->first <= now)
    out.push_back(remove_queued(deadlines_.begin()->second));
  return out;
}

std::vector<QueuedJob> FairQueue::drain() {
  std::vector<QueuedJob> out;
  while (!queued_index_.empty()) out.push_back(remove_queued(queued_index_.begin()->first));
  std::sort(out.begin(), out.end(), [](const QueuedJob& a, const QueuedJob& b) { return a.id < b.id; });
  return out;
}

std::optional<Clock::time_point> FairQueue::next_deadline() const {
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.begin()->first;
}

int FairQueue::retry_after_seconds(const std::string& tenant) const {
  const Tenant& t = tenant_state(tenant);
  const Partition& p = partitions_[t.partition];
  double rate = t.drain.known() ? t.drain.per_second() : p.drain.known() ? p.drain.per_second() : kDefaultDrainPerS;
  const double backlog = static_cast<double>(std::max<size_t>(t.queue.size(), 1));
  const double s = std::ceil(backlog / std::max(rate, 1e-9));
  return static_cast<int>(std::clamp(s, 1.0, 60.0));
}

int FairQueue::inflight(const std::string& partition) const {
  return partition_state(partition).inflight;
}
int FairQueue::limit(const std::string& partition) const {
  return partition_state(partition).spec.workqueue_limit;
}
int64_t FairQueue::queue_depth(const std::string& partition) const {
  return partition_state(partition).queued;
}
double FairQueue::partition_busy_seconds(const std::string& partition) const {
  return partition_state(partition).busy_s;
}
int64_t FairQueue::queued(const std::string& tenant) const {
  return static_cast<int64_t>(tenant_state(tenant).queue.size());
}
int FairQueue::running(const std::string& tenant) const {
  return tenant_state(tenant).running;
}
double FairQueue::busy_seconds(const std::string& tenant) const {
  return tenant_state(tenant).busy_s;
}
int64_t FairQueue::completed(const std::string& tenant) const {
  return tenant_state(tenant).completed;
}
double FairQueue::drain_rate(const std::string& tenant) const {
  return tenant_state(tenant).drain.per_second();
}
double FairQueue::virtual_time(const std::string& tenant) const {
  return tenant_state(tenant).vtime;
}
const std::string& FairQueue::partition_of(const std::string& tenant) const {
  return partitions_[tenant_state(tenant).partition].spec.name;
}

}  // namespace tensord
