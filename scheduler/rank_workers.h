// RankWorkers: this server's R local ranks (--ranks R; API.md 8). On the
// CPU each rank is a worker thread with its own Gloo TCP device on
// loopback and its own flight recorder; a job's SPMD program runs on the
// threads of the ranks its group names, one part per rank, with the rank's
// ProcessGroup over that group (created when first used: every member
// joins through an in-process store).
//
// SPMD jobs run one at a time: every rank issues a group's collectives in
// one order only when no other job's collectives interleave with them.
// A job that failed on some rank may leave a collective pending on the
// others; retire() replaces the group, and the old one winds down (bounded
// by the collective timeout) on a thread of its own, so the next job finds
// a healthy group at once.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ops/dist/collective.h"

namespace gloo {
namespace rendezvous {
class Store;
}
namespace transport {
class Device;
}
}  // namespace gloo

namespace tensord {

namespace dist {
class FlightRecorder;
class ProcessGroup;
}  // namespace dist

struct RankWorkersOptions {
  int ranks = 1;
  std::chrono::milliseconds collective_timeout{60000};
  size_t flight_recorder_entries = 2048;
  // Each collective as a rank submits it (metrics): group, the rank's index
  // in it, op, input bytes.
  std::function<void(const std::string& group, int rank, dist::CollectiveOp op, size_t bytes)> on_collective;
};

class RankWorkers {
 public:
  explicit RankWorkers(RankWorkersOptions opts);
  ~RankWorkers();
  RankWorkers(const RankWorkers&) = delete;
  RankWorkers& operator=(const RankWorkers&) = delete;

  int size() const { return static_cast<int>(opts_.ranks); }
  std::chrono::milliseconds collective_timeout() const { return opts_.collective_timeout; }

  // Runs part(i, group) on local rank ranks[i]'s thread for every i, with
  // that rank's group over `ranks`, and returns when every part returned:
  // their exceptions by index (null for a part that succeeded). `tick` runs
  // on the caller's thread every few milliseconds meanwhile (a job watches
  // its cancel flag and deadline there). One call at a time. When a part
  // failed, a collective may be left pending on the others: the group is
  // replaced before the next call, whose use joins a new one.
  using Part = std::function<void(size_t index, dist::ProcessGroup& group)>;
  std::vector<std::exception_ptr> run(const std::vector<int>& ranks, const Part& part,
                                      const std::function<void()>& tick);
  // Local rank r's flight recorder.
  std::shared_ptr<dist::FlightRecorder> recorder(int r) const;

 private:
  struct Rank;
  struct Group;
  // Rank `r`'s part of the group over `ranks` (its member `index`),
  // joining it first when it does not exist yet. Runs on rank r's thread.
  dist::ProcessGroup& group_of(const std::vector<int>& ranks, size_t index);
  // Drops the group over `ranks` (run_mu_ held, no part running).
  void retire(const std::vector<int>& ranks);

  const RankWorkersOptions opts_;
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::mutex run_mu_;  // one SPMD run at a time

  std::mutex groups_mu_;
  std::map<std::string, std::shared_ptr<Group>> groups_;
  int64_t next_pg_id_ = 0;
  int64_t generation_ = 0;
  std::vector<std::thread> reapers_;  // retired groups winding down
};

}  // namespace tensord
