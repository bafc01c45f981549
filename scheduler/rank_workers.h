// RankWorkers: this server's R local ranks (--ranks R; API.md 8). Each
// rank is a worker thread with its own flight recorder; a job's SPMD
// program runs on the threads of the ranks its group names, one part per
// rank, with the rank's ProcessGroup over that group (created when first
// used: every member joins through the store). On the CPU the groups are
// Gloo's, over one TCP device on loopback; with a group factory
// (RankWorkersOptions::groups: NCCL on CUDA, local rank r on GPU r) the
// factory makes them instead and no Gloo device is opened.
//
// SPMD jobs run one at a time: every rank issues a group's collectives in
// one order only when no other job's collectives interleave with them.
// A job that failed on some rank may leave a collective pending on the
// others; retire() replaces the group, and the old one winds down (bounded
// by the collective timeout) on a thread of its own, so the next job finds
// a healthy group at once.
// Thread-safe.
#pragma once

#include <atomic>
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
#include "ops/dist/group_factory.h"
#include "scheduler/spmd/peer_call_pool.h"

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
  int ranks = 1;        // this server's ranks (--ranks)
  int world_size = 0;   // ranks in the world (--world-size; 0: `ranks`)
  int rank_offset = 0;  // this server's first global rank (--rank-offset)
  // Where a group's members meet (--rendezvous): a new store for each
  // member that joins (a Redis connection is not shared between threads);
  // null: one in-process store (a world of this server alone).
  std::function<std::shared_ptr<gloo::rendezvous::Store>()> make_store;
  // The address this server's ranks listen on for their peers.
  std::string hostname = "127.0.0.1";
  std::chrono::milliseconds collective_timeout{60000};
  size_t flight_recorder_entries = 2048;
  // Each collective as a rank submits it (metrics): group, the rank's index
  // in it, op, input bytes.
  std::function<void(const std::string& group, int rank, dist::CollectiveOp op, size_t bytes)> on_collective;
  // How members join their groups; unset (no `make`): Gloo.
  dist::GroupFactory groups;
};

class RankWorkers {
 public:
  explicit RankWorkers(RankWorkersOptions opts);
  ~RankWorkers();
  RankWorkers(const RankWorkers&) = delete;
  RankWorkers& operator=(const RankWorkers&) = delete;

  int size() const { return opts_.ranks; }  // local ranks
  int world() const { return opts_.world_size; }
  int offset() const { return opts_.rank_offset; }
  // Whether global rank g is one of this server's.
  bool is_local(int g) const { return g >= opts_.rank_offset && g < opts_.rank_offset + opts_.ranks; }
  std::chrono::milliseconds collective_timeout() const { return opts_.collective_timeout; }

  // Runs part(i, group) for every member i of the group over `ranks`
  // (global ranks, in the group's order) that is local, on its rank's
  // thread, with its ProcessGroup, and returns when every part returned:
  // their exceptions by member (null for a member that succeeded or is not
  // local). The members meet under `key_prefix` (the group is joined anew
  // when it changes: every server of a world must use the same one). `tick`
  // runs on the caller's thread every few milliseconds meanwhile (a job
  // watches its cancel flag and deadline there). One call at a time. When a
  // part failed, a collective may be left pending on the others: the group
  // is dropped, and the caller should pick a new prefix. As soon as a part
  // fails, or `stop` (when given) is set, the group is aborted
  // (ProcessGroup::abort): the other members' collectives, and their
  // peers' on other servers, fail at once, members still joining stop, and
  // the group is dropped.
  using Part = std::function<void(size_t index, dist::ProcessGroup& group)>;
  std::vector<std::exception_ptr> run(const std::vector<int>& ranks, const std::string& key_prefix, const Part& part,
                                      const std::function<void()>& tick, const std::atomic<bool>* stop = nullptr);
  // Local rank r's flight recorder (global rank offset() + r).
  std::shared_ptr<dist::FlightRecorder> recorder(int r) const;
  // Where the coordinator's calls to the parts on other servers run.
  PeerCallPool& peer_calls() { return peer_calls_; }

 private:
  struct Rank;
  struct Group;
  // Member `index`'s part of `g` over `ranks`, joining it first when it
  // has not yet. Runs on the member's rank thread.
  dist::ProcessGroup& member_of(Group& g, const std::vector<int>& ranks, size_t index);
  // Member `index` joining `g` (blocks until every member joined, the
  // rendezvous timeout, or the group's abort).
  std::unique_ptr<dist::ProcessGroup> join(Group& g, const std::vector<int>& ranks, size_t index);
  // Drops the group over `ranks` (run_mu_ held, no part running).
  void retire(const std::vector<int>& ranks);

  const RankWorkersOptions opts_;
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::mutex run_mu_;  // one SPMD run at a time

  std::mutex groups_mu_;
  std::map<std::string, std::shared_ptr<Group>> groups_;
  int64_t next_pg_id_ = 0;
  std::vector<std::thread> reapers_;  // retired groups winding down
  PeerCallPool peer_calls_;           // first to go: its calls wait on no rank
};

}  // namespace tensord
