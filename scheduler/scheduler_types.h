// Values the JobScheduler hands out: what a running job is told, the events
// it reports (the engine's metrics subscribe to them), and stats snapshots.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ops/error.h"
#include "scheduler/clock.h"

namespace tensord {

class ThreadPool;

// Given to a job's run callback on its runner thread.
struct PartitionContext {
  std::string partition;
  std::string tenant;
  ThreadPool* pool = nullptr;  // the partition's compute pool (OpContext.pool)
  uint64_t job_id = 0;
  int runner = 0;  // the runner's index in its partition: the job's stream (lane)
  double queue_seconds = 0;
  // Running jobs check it at node boundaries (504 deadline_exceeded).
  Clock::time_point deadline = Clock::time_point::max();
};

struct JobEvent {
  enum class Kind {
    kQueued,
    kStarted,
    kFinished,  // run returned (the job's own outcome is the caller's business)
    kFailed,    // never ran (cancelled, deadline, shutdown) or run threw; see error
  };
  Kind kind = Kind::kQueued;
  uint64_t id = 0;
  std::string tenant;
  std::string partition;
  int priority = 0;
  double queue_seconds = 0;  // started, finished, failed
  double run_seconds = 0;    // finished, failed after running
  std::optional<ErrorCode> error;
  std::string message;
};

const char* job_event_kind_name(JobEvent::Kind kind);

struct SchedulerStats {
  struct Partition {
    std::string name;
    int inflight = 0;
    int limit = 0;
    int64_t queued = 0;
    double busy_seconds = 0;
    int threads = 0;        // compute pool size
    std::vector<int> cpus;  // CPU ids the partition's threads are pinned to
  };
  struct Tenant {
    std::string name;
    std::string partition;
    int64_t queued = 0;
    int running = 0;
    double busy_seconds = 0;
    int64_t completed = 0;  // ran to the end (run returned or threw)
    int64_t failed = 0;     // run threw
    int64_t cancelled = 0;  // cancelled while queued
    int64_t expired = 0;    // deadline passed while queued
    int64_t rejected = 0;   // queue_full at submit
  };
  std::vector<Partition> partitions;
  std::vector<Tenant> tenants;
};

}  // namespace tensord
