// An SPMD job's plan (API.md 8), made on the submitting thread before
// anything is queued: the group, every rank's inputs (replicated, per-rank
// or sharded ones split as torch.tensor_split does), every rank's compiled
// program, the checks across ranks that must hold before any rank enters a
// collective (equal shapes and dtypes where a collective needs them), and
// which values are equal on every rank by construction (replicated).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "graphs/compiled_program.h"
#include "scheduler/job.h"

namespace tensord {

struct SpmdPlan {
  std::vector<int> ranks;                             // the group's ranks, in its order
  std::string group;                                  // "world", "ranks:1,3"
  std::vector<CompiledProgram> programs;              // per member
  std::vector<std::map<std::string, Tensor>> inputs;  // per member
  // Value ids of programs[0] (every member's program has the same values
  // and nodes) equal on every rank.
  std::set<int> replicated;

  bool is_replicated_output(const std::string& name) const;
};

// Throws tensord::Error (bad_request for a malformed group or inputs;
// shape_mismatch / dtype_mismatch naming the node when ranks disagree at a
// collective; invalid_argument for a stored write of a per-rank value).
// `world`: this server's ranks.
SpmdPlan plan_spmd(const JobSpec& spec, const StoredLookup& stored, int world);

}  // namespace tensord
