// What shape inference of the dist.* ops knows about the group one rank's
// program is compiled for (an SPMD job, API.md 8). The SPMD planner sets it
// on the compiling thread for one compile (SpmdInferScope); without one,
// inference sees a group of one rank, as a request without "ranks" runs.
//
// A thread-local rather than a compile_program parameter: only these ops
// read it, and compile_program (with its control-flow bodies) stays
// unaware of collectives.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tensord::dist {

struct SpmdInferContext {
  int group_size = 1;
  // all_gather's input extent along its dim on every rank of the group, by
  // node id, from an earlier compile of every rank (the planner compiles to
  // a fixpoint, since a gathered extent may depend on another gather's);
  // absent: every rank is taken to have this rank's extent.
  std::map<std::string, std::vector<int64_t>> gather_extents;
  // Filled by inference: this rank's input extent at each all_gather node.
  std::map<std::string, int64_t> seen_extents;
};

// Installs `c` for the current thread until destroyed (scopes nest).
class SpmdInferScope {
 public:
  explicit SpmdInferScope(SpmdInferContext& c);
  ~SpmdInferScope();
  SpmdInferScope(const SpmdInferScope&) = delete;
  SpmdInferScope& operator=(const SpmdInferScope&) = delete;

 private:
  SpmdInferContext* prev_;
};

// The current thread's context, or null.
SpmdInferContext* current_spmd_infer();

}  // namespace tensord::dist
