// Runs an SPMD plan (scheduler/spmd_plan.h) on this server's ranks: every
// member's program on its rank's thread, with the rank's group for the
// dist.* kernels. A failure on one rank stops the others at their next
// node or collective wait, and the job ends with the first real error
// (not the others' cancellations).
#pragma once

#include <atomic>
#include <vector>

#include "graphs/exec_options.h"
#include "graphs/executor.h"

namespace tensord {

class RankWorkers;
struct SpmdPlan;

// `base`: the job's options (deadline, stored reads, on_node: reported for
// the group's first member only); `cancelled`: the job's cancel flag.
// Returns every member's result, in the group's order.
std::vector<ExecResult> run_spmd(const SpmdPlan& plan, RankWorkers& workers, const ExecOptions& base,
                                 const std::atomic<bool>& cancelled);

}  // namespace tensord
