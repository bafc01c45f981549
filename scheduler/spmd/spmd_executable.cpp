#include "scheduler/spmd/spmd_executable.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "ops/error.h"
#include "scheduler/job_spec.h"
#include "scheduler/rank_workers.h"
#include "scheduler/spmd/spmd_keys.h"
#include "scheduler/spmd_plan.h"

namespace tensord {

SpmdExecutable::SpmdExecutable(std::shared_ptr<const SpmdPlan> plan, const JobSpec& spec, SpmdSite site, Member member)
    : plan_(std::move(plan)), spec_(&spec), site_(std::move(site)), member_(std::move(member)) {
  TENSORD_ASSERT(site_.workers && site_.keys);
}

const CompiledProgram& SpmdExecutable::program() const {
  return plan_->programs.empty() ? empty_program() : *plan_->programs[0];
}

ExecResult SpmdExecutable::run(const std::map<std::string, Tensor>& /*inputs*/, const ExecOptions& opts) {
  static const SpmdRequest kGraphReplay;  // a replay of an SPMD graph may say no "ranks"
  const SpmdRequest& sr = spec_->spmd ? *spec_->spmd : kGraphReplay;
  SpmdRun run;
  run.plan = plan_.get();
  run.spec = spec_;
  run.peers = site_.peers;
  run.part = sr.part_members;
  run.key = sr.part_key.empty() ? site_.keys->key(plan_->group, false) : sr.part_key;
  run.places = site_.places;
  run.run_member = member_;
  static const std::atomic<bool> kNotCancelled{false};
  const std::atomic<bool>& cancelled = opts.ctx.cancelled ? *opts.ctx.cancelled : kNotCancelled;
  std::vector<bool> ran;
  std::vector<ExecResult> members;
  try {
    members = run_spmd(run, *site_.workers, opts, cancelled, ran);
  } catch (const Error& e) {
    if (sr.part_key.empty()) site_.keys->key(plan_->group, true);  // the next job meets in a fresh group
    if (e.code() == ErrorCode::kDeadlineExceeded && site_.on_collective_timeout) site_.on_collective_timeout();
    throw;
  } catch (...) {
    if (sr.part_key.empty()) site_.keys->key(plan_->group, true);
    throw;
  }
  return view(members, ran, sr, opts);
}

ExecResult SpmdExecutable::view(const std::vector<ExecResult>& members, const std::vector<bool>& ran,
                                const SpmdRequest& sr, const ExecOptions& opts) const {
  const RankWorkers& workers = *site_.workers;
  size_t first = 0;
  while (first < ran.size() && !(ran[first] && workers.is_local(plan_->ranks[first]))) ++first;
  if (first == ran.size()) throw Error(ErrorCode::kInternal, "no member of the group ran on this server");
  ExecResult er = members[first];
  if (!site_.places.empty() &&
      site_.places.at(static_cast<size_t>(plan_->ranks[first] - workers.offset())).device != opts.ctx.device) {
    // That member ran on another GPU than the tenant's store lives on: its
    // stored writes move to the store's device, and the stored tensors it
    // copied to its GPU stay where they were.
    for (auto& [name, t] : er.stored_writes) t = t.to_device(opts.ctx.backend, opts.ctx.device, opts.ctx.account);
    er.relocated.clear();
  }
  std::vector<size_t> shown;  // the members whose values this server answers with
  for (size_t i = 0; i < ran.size(); ++i) {
    if (sr.part_members.empty()
            ? ran[i]
            : std::find(sr.part_members.begin(), sr.part_members.end(), i) != sr.part_members.end()) {
      shown.push_back(i);
    }
  }
  er.spmd = true;
  er.per_rank.resize(er.outputs.size());
  for (size_t k = 0; k < er.outputs.size(); ++k) {
    if (plan_->is_replicated_output(er.outputs[k].first)) continue;
    for (size_t i : shown) er.per_rank[k].push_back(members[i].outputs[k].second);
  }
  return er;
}

}  // namespace tensord
