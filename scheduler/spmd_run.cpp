#include "scheduler/spmd_run.h"

#include <chrono>
#include <exception>
#include <optional>

#include "ops/error.h"
#include "scheduler/rank_workers.h"
#include "scheduler/spmd_plan.h"

namespace tensord {

std::vector<ExecResult> run_spmd(const SpmdPlan& plan, RankWorkers& workers, const ExecOptions& base,
                                 const std::atomic<bool>& cancelled) {
  const size_t n = plan.ranks.size();
  std::vector<ExecResult> results(n);
  // Every member stops when any fails, the job is cancelled or its deadline
  // passes: at its next node, or while it waits in a collective.
  std::atomic<bool> abort{false};
  auto part = [&](size_t i, dist::ProcessGroup& group) {
    ExecOptions eo = base;
    eo.ctx.group = &group;
    // The ranks share the partition's cores: each runs its kernels inline
    // on its own thread (a pool is fed by one runner at a time).
    eo.ctx.pool = nullptr;
    eo.ctx.cancelled = &abort;
    eo.cancelled = &abort;
    if (i != 0) eo.on_node = nullptr;  // metrics and traces count the group's work once
    try {
      results[i] = execute_program(plan.programs[i], plan.inputs[i], eo);
    } catch (...) {
      abort.store(true);
      throw;
    }
  };
  auto tick = [&] {
    if (cancelled.load() || std::chrono::steady_clock::now() >= base.deadline) abort.store(true);
  };
  std::vector<std::exception_ptr> errors = workers.run(plan.ranks, part, tick);

  std::exception_ptr first;
  std::optional<Error> first_cancel;
  for (const auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      if (err.code() == ErrorCode::kCancelled) {
        if (!first_cancel) first_cancel = err;
        continue;
      }
      if (!first) first = e;
    } catch (...) {
      if (!first) first = e;
    }
  }
  if (!first && !first_cancel) return results;
  if (first) std::rethrow_exception(first);
  if (!cancelled.load() && std::chrono::steady_clock::now() >= base.deadline) {
    throw Error(ErrorCode::kDeadlineExceeded,
                "the job's deadline passed while its ranks ran (group " + plan.group + "): " + first_cancel->message());
  }
  throw *first_cancel;
}

}  // namespace tensord
