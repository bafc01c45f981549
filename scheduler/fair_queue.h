// Per-tenant queues and weighted fair sharing of each partition's workqueue.
// A pure data structure: no threads, no clock of its own (callers pass
// `now`), not thread-safe (JobScheduler holds its lock around every call).
//
// Fairness: virtual-time fair queueing (start-time fair queueing, the rule
// Linux CFS uses), with measured run time as the cost. Each tenant has a
// virtual time v = (run seconds charged to it) / weight. pop() starts a job
// of the eligible tenant (work queued, running < max_running) with the
// smallest v, and charges v += estimate / weight at once (estimate: EWMA of
// the tenant's run times, else the partition's, else 10 ms) so concurrent
// slots spread across tenants; finished() corrects the charge to the
// measured run time, v += (run - estimate) / weight, so shares of busy time
// follow the weights even when job sizes differ. A tenant whose queue was
// empty re-enters at v = max(v, partition virtual clock) (the largest v
// picked so far): idle time banks no credit, and a weight-w tenant waits at
// most about (sum of weights / w) job starts. Ties go to the tenant listed
// first.
//
// Within a tenant: higher priority first, FIFO among equal priorities.
// Limits: pop() never takes a partition past workqueue_limit nor a tenant
// past max_running; push() throws QueueFullError at max_queued.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "scheduler/clock.h"
#include "scheduler/drain_rate.h"
#include "scheduler/scheduling_spec.h"

namespace tensord {

struct QueuedJob {
  uint64_t id = 0;
  std::string tenant;
  int priority = 0;  // higher first within the tenant
  Clock::time_point enqueued{};
  Clock::time_point deadline = Clock::time_point::max();  // max(): none
};

class FairQueue {
 public:
  // Throws Error(kInvalidArgument) on duplicate names, a tenant whose
  // partition does not exist, or non-positive weight / limits.
  FairQueue(std::vector<PartitionSpec> partitions, std::vector<TenantSpec> tenants);

  // Queues a job (job.enqueued is the caller's `now`). Throws
  // QueueFullError (kQueueFull, with retry_after_seconds()) when the tenant
  // has max_queued waiting; Error(kInternal) for an unknown tenant or an id
  // already queued or running.
  void push(QueuedJob job);

  // The next job allowed to start on `partition`, now marked running; empty
  // when the partition is at its limit or no tenant has eligible work.
  // Deadlines are not looked at here: call expire(now) first.
  std::optional<QueuedJob> pop(const std::string& partition, Clock::time_point now);

  // A job returned by pop() ended (any outcome) after run_seconds.
  void finished(const QueuedJob& job, Clock::time_point now, double run_seconds);

  // A config reload. `partitions` gives new workqueue limits for existing
  // partitions (shares and the set of partitions never change: listing an
  // unknown one is an error; one left out keeps its limit). `tenants` is the
  // new set of active tenants: known ones get the new weight and limits (a
  // lower max_queued leaves already queued jobs queued), new ones join at
  // the partition's virtual clock, and ones left out are removed: push()
  // refuses them (kUnauthenticated) while their queued and running jobs
  // still run. A removed tenant listed again comes back with its state.
  // A tenant cannot change partition. Throws Error(kInvalidArgument)
  // before changing anything.
  void reconfigure(const std::vector<PartitionSpec>& partitions, const std::vector<TenantSpec>& tenants);

  // Removes a queued job; empty when `id` is not queued (running or unknown).
  std::optional<QueuedJob> cancel(uint64_t id);
  // Removes and returns the queued jobs whose deadline is <= now.
  std::vector<QueuedJob> expire(Clock::time_point now);
  // Removes and returns every queued job (shutdown).
  std::vector<QueuedJob> drain();
  // The earliest deadline among queued jobs.
  std::optional<Clock::time_point> next_deadline() const;

  bool is_queued(uint64_t id) const { return queued_index_.count(id) != 0; }
  bool is_running(uint64_t id) const { return charged_.count(id) != 0; }

  // Retry-After for a full queue: the tenant's queued jobs divided by its
  // drain rate (completions/s; the partition's when the tenant's is not yet
  // measured; 1/s when neither is), rounded up and clamped to [1, 60].
  int retry_after_seconds(const std::string& tenant) const;

  // ---- stats (unknown names throw Error(kInternal)) ----
  int inflight(const std::string& partition) const;
  int limit(const std::string& partition) const;
  int64_t queue_depth(const std::string& partition) const;  // queued, all tenants
  double partition_busy_seconds(const std::string& partition) const;
  int64_t queued(const std::string& tenant) const;
  int running(const std::string& tenant) const;
  double busy_seconds(const std::string& tenant) const;  // on its partition
  int64_t completed(const std::string& tenant) const;    // finished() calls
  double drain_rate(const std::string& tenant) const;    // completions/s, 0 unknown
  double virtual_time(const std::string& tenant) const;
  const std::string& partition_of(const std::string& tenant) const;

  const std::vector<PartitionSpec>& partitions() const { return partition_specs_; }
  // Active tenants (removed ones are left out), config order.
  const std::vector<TenantSpec>& tenants() const { return tenant_specs_; }

 private:
  // (-priority, arrival sequence); 64-bit so that every int priority negates.
  using Key = std::pair<int64_t, uint64_t>;
  struct Partition {
    PartitionSpec spec;
    std::vector<size_t> tenants;  // indices into tenants_, config order
    int inflight = 0;
    int64_t queued = 0;
    double vclock = 0;  // largest virtual time picked so far
    double busy_s = 0;
    double est_run_s = 0;  // EWMA of run seconds (valid when est_known)
    bool est_known = false;
    DrainRate drain;
  };
  struct Tenant {
    TenantSpec spec;
    size_t partition = 0;
    bool removed = false;  // by a reload: accepts no new jobs
    std::map<Key, QueuedJob> queue;
    int running = 0;
    double vtime = 0;
    double busy_s = 0;
    int64_t completed = 0;
    double est_run_s = 0;
    bool est_known = false;
    DrainRate drain;
  };

  // Checks a tenant spec (known partition, weight, queue limits); returns
  // its partition's index. Throws Error(kInvalidArgument).
  size_t checked_partition_of(const TenantSpec& t) const;
  Tenant& tenant_state(const std::string& name);
  const Tenant& tenant_state(const std::string& name) const;
  Partition& partition_state(const std::string& name);
  const Partition& partition_state(const std::string& name) const;
  QueuedJob remove_queued(uint64_t id);
  double estimate(const Tenant& t) const;

  std::vector<PartitionSpec> partition_specs_;
  std::vector<TenantSpec> tenant_specs_;
  std::vector<Partition> partitions_;
  std::vector<Tenant> tenants_;
  std::unordered_map<std::string, size_t> partition_index_;
  std::unordered_map<std::string, size_t> tenant_index_;
  std::unordered_map<uint64_t, std::pair<size_t, Key>> queued_index_;  // id -> (tenant, key)
  std::unordered_map<uint64_t, double> charged_;                       // running id -> estimate charged
  std::set<std::pair<Clock::time_point, uint64_t>> deadlines_;         // queued jobs with a deadline
  uint64_t seq_ = 0;
};

}  // namespace tensord
