// An SPMD job (API.md 8) as one Executable: every member of its plan runs
// on its rank (scheduler/spmd/spmd_run.h: local ranks on their threads, the
// others through their peers), and the result is this server's view of the
// group: the outputs and stored writes of its first local member that ran
// (stored writes are replicated: plan_spmd checked), moved to the tenant's
// device where that member ran on another GPU, with every answered
// member's value of each output that differs across ranks (per_rank). A
// failed run moves the group to a fresh generation (SpmdKeys) unless a
// coordinator named the key, and a collective timeout calls
// `on_collective_timeout` (the server writes the flight recorders).
//
// Thread-safety: run() by one runner at a time (one SPMD job at a time
// runs on the ranks: RankWorkers).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graphs/executable.h"
#include "scheduler/spmd/spmd_run.h"

namespace tensord {

class SpmdKeys;
struct SpmdRequest;

// Where an SPMD job's members run: the engine's ranks and how it reaches
// the world's other servers.
struct SpmdSite {
  RankWorkers* workers = nullptr;
  std::shared_ptr<SpmdPeers> peers;  // null: every member must be local
  std::vector<RankPlace> places;     // by local rank; empty: the job's device
  SpmdKeys* keys = nullptr;
  std::function<void()> on_collective_timeout;
};

class SpmdExecutable final : public Executable {
 public:
  using Member = std::function<ExecResult(size_t i, const ExecOptions& opts)>;
  // `spec`: the job's request, which outlives the executable (what peers
  // are sent; its "ranks" part). `member` runs local member i (a captured
  // graph's replay plan); null: the executor over the plan's program and
  // inputs.
  SpmdExecutable(std::shared_ptr<const SpmdPlan> plan, const JobSpec& spec, SpmdSite site, Member member = nullptr);
  // `inputs` is not read: the plan holds each member's.
  ExecResult run(const std::map<std::string, Tensor>& inputs, const ExecOptions& opts) override;
  // The first member's (an empty one for work that is not a program:
  // Engine::run_on_ranks).
  const CompiledProgram& program() const override;

 private:
  ExecResult view(const std::vector<ExecResult>& members, const std::vector<bool>& ran, const SpmdRequest& sr,
                  const ExecOptions& opts) const;

  std::shared_ptr<const SpmdPlan> plan_;
  const JobSpec* spec_;
  SpmdSite site_;
  Member member_;
};

}  // namespace tensord
