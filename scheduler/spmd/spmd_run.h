// Runs an SPMD plan (scheduler/spmd_plan.h) on the world's ranks: every
// local member's program on its rank's thread, with the rank's group for
// the dist.* kernels, and the members on other servers through their
// peers (scheduler/spmd_peers.h). A failure anywhere stops the others at
// their next node or collective wait, and the job ends with the first
// real error (not the others' cancellations).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graphs/exec_options.h"
#include "graphs/executor.h"

namespace tensord {

class RankWorkers;
class SpmdPeers;
struct JobSpec;
struct SpmdPlan;

// Where a local rank's kernels run on a device backend (CUDA: local rank r
// on GPU r, a stream of its own, used by one SPMD job at a time).
struct RankPlace {
  Device device;
  Stream stream;
};

struct SpmdRun {
  const SpmdPlan* plan = nullptr;
  const JobSpec* spec = nullptr;     // what a peer is sent
  std::string key;                   // where the group's members meet
  std::shared_ptr<SpmdPeers> peers;  // null: every member must be local
  // Members this server runs: the part a coordinator forwarded, or (empty)
  // every local member, the others going to their peers.
  std::vector<size_t> part;
  // Runs local member i with its rank's options (a captured graph's replay
  // plan); null: execute_program over the plan's program and inputs.
  std::function<ExecResult(size_t i, const ExecOptions& opts)> run_member;
  // By local rank; empty: every member on the job's device and stream (the
  // CPU backend: the partition's cores, shared by its ranks).
  std::vector<RankPlace> places;
};

// `base`: the job's options (deadline, stored reads, on_node: reported for
// one member only); `cancelled`: the job's cancel flag. Returns a result
// for every member of the group that ran here or on a peer (a peer's
// members carry outputs only), in the group's order; `ran[i]` says which.
std::vector<ExecResult> run_spmd(const SpmdRun& run, RankWorkers& workers, const ExecOptions& base,
                                 const std::atomic<bool>& cancelled, std::vector<bool>& ran);

}  // namespace tensord
