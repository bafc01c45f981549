// An SPMD job's plan (API.md 8), made on the submitting thread before
// anything is queued: the group, every rank's inputs (replicated, per-rank
// or sharded ones split as torch.tensor_split does), every rank's compiled
// program, the checks across ranks that must hold before any rank enters a
// collective (equal shapes and dtypes where a collective needs them), and
// which values are equal on every rank by construction (replicated).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "graphs/compiled_program.h"
#include "scheduler/job_spec.h"

namespace tensord {

struct SpmdPlan {
  std::vector<int> ranks;  // the group's ranks, in its order
  std::string group;       // "world", "ranks:1,3"
  // Per member; shared with a captured SPMD graph's replay plans.
  std::vector<std::shared_ptr<const CompiledProgram>> programs;
  std::vector<std::map<std::string, Tensor>> inputs;  // per member
  // Value ids of programs[0] (every member's program has the same values
  // and nodes) equal on every rank.
  std::set<int> replicated;
  // The extents of the uneven all_gathers the programs were compiled with
  // (by node id, every member's).
  std::map<std::string, std::vector<int64_t>> gather_extents;

  bool is_replicated_output(const std::string& name) const;
};

// Throws tensord::Error (bad_request for a malformed group or inputs;
// shape_mismatch / dtype_mismatch naming the node when ranks disagree at a
// collective; invalid_argument for a stored write of a per-rank value).
// `world`: this server's ranks.
SpmdPlan plan_spmd(const JobSpec& spec, const StoredLookup& stored, int world);

// The pieces of plan_spmd, for a graph captured with ranks (its members are
// compiled once, over declared input metas) and for its replays.
//
// The group a request's "ranks" names: every rank of the world for a
// count (which must be the world's), else the list (bad_request for one
// outside the world or listed twice).
std::vector<int> spmd_group(const SpmdRequest& s, int world);
// Its name: "world" or "ranks:1,3".
std::string spmd_group_name(const std::vector<int>& ranks, int world);
// Every member's program over its input metas (`metas[i]`: member i's,
// one per member of p.ranks), compiled again until the extents of uneven
// all_gathers settle, then the checks across ranks at every collective
// (shape_mismatch / dtype_mismatch naming the node). Sets p.programs.
void compile_spmd(SpmdPlan& p, const Program& program, const std::vector<std::map<std::string, TensorMeta>>& metas,
                  const StoredLookup& stored);
// The same over a graph's declared inputs: `same` on every rank, and
// `per_rank` one meta per member (bad_request naming the input for another
// count). p.ranks set.
void compile_spmd_declared(SpmdPlan& p, const Program& program, const std::map<std::string, TensorMeta>& same,
                           const std::map<std::string, std::vector<TensorMeta>>& per_rank, const StoredLookup& stored);
// Runs `f` (a member's replay plan being bound, which infers its nodes'
// results again) with the dist.* ops' inference seeing p's group and extents.
void in_spmd_infer_scope(const SpmdPlan& p, const std::function<void()>& f);
// A replay of a graph whose members `programs` were compiled for the group
// `ranks`: the request's inputs split per member, its "ranks" (when it says
// any) checked against the group, the replicated values for the inputs it
// gives per rank, and its stored writes checked as plan_spmd does. The
// input shapes are the replay plans' to check (409).
SpmdPlan plan_spmd_replay(const JobSpec& spec, const std::vector<int>& ranks, const std::string& group,
                          std::vector<std::shared_ptr<const CompiledProgram>> programs, int world);

}  // namespace tensord
