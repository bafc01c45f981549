// A cond or while_loop node of a CPU replay plan (graphs/replay_plan.h)
// with its subprograms bound once as replay plans of their own, so that a
// replay runs their recorded loops instead of execute_program's per-trip
// dispatch, allocation and binding (per-trip costs: bench/README.md,
// captured loops).
//
//  - cond: the then and else plans read the node's operands where the
//    parent plan keeps them (its static buffers); the branch the predicate
//    names runs.
//  - while_loop: the carries live in buffers of their own, which the cond
//    and body plans both take as their inputs. A trip runs the cond plan,
//    reads its bool, runs the body plan and copies its results into the
//    carries (through staging buffers when a result is another carry's
//    buffer: a swap). Cancellation, the deadline and max_iters are checked
//    per trip, as execute_program's loop does, with the same errors.
//
// Each subprogram plan has its own pool (its buffers are live while the
// parent's are), charged to the tenant and counted in the graph's bytes.
// Results are views of the plans' buffers, valid until the next run; the
// parent copies them into its own. Subprograms that write stored tensors
// (anywhere, nested included) keep the general path.
#pragma once

#include <memory>
#include <vector>

#include "graphs/compiled_program.h"
#include "graphs/exec_options.h"

namespace tensord {

class GraphPool;
class ReplayPlan;

class ControlPlan {
 public:
  // Whether node `b` runs this way: a cond or while_loop whose subprograms
  // write no stored tensor.
  static bool eligible(const BoundNode& b);

  // `operands`: the node's operands as the parent plan binds them (its
  // static tensors). Throws quota_exceeded when the buffers do not fit.
  ControlPlan(const BoundNode& b, const std::vector<Tensor>& operands, Backend* backend,
              std::shared_ptr<MemoryAccount> account);
  ~ControlPlan();
  ControlPlan(const ControlPlan&) = delete;
  ControlPlan& operator=(const ControlPlan&) = delete;

  // Runs the node once over the current contents of its operands.
  std::vector<Tensor> run(const ExecOptions& opts);
  // Bytes of the carries and of the subprogram plans' pools.
  int64_t bytes() const;

 private:
  const BoundNode& b_;
  std::vector<Tensor> operands_;
  std::vector<Tensor> carries_, staging_;  // while_loop
  std::vector<std::unique_ptr<GraphPool>> pools_;
  // cond: its then and else branches; while_loop: its cond and body.
  std::unique_ptr<ReplayPlan> then_or_cond_, else_or_body_;
  int64_t carry_bytes_ = 0;
};

}  // namespace tensord
