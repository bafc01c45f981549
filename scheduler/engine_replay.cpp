// The engine's entry points for work that is not a fresh program: graph
// replays (plain and SPMD: a pool's gate admits one replay of it at a
// time) and tasks (a graph's capture, run as a job: GraphService).
#include <utility>

#include "graphs/graph_store.h"
#include "graphs/replay_plan.h"
#include "ops/error.h"
#include "scheduler/engine.h"
#include "scheduler/engine_metrics.h"
#include "scheduler/engine_work.h"
#include "scheduler/rank_workers.h"
#include "scheduler/spmd_plan.h"
#include "scheduler/spmd/spmd_executable.h"
#include "scheduler/task_executable.h"

namespace tensord {

std::shared_ptr<Job> Engine::run_task_async(Tenant& tenant, const std::string& request_id,
                                            std::function<void(const ExecOptions&)> task,
                                            std::function<void(Job&)> done) {
  auto w = std::make_shared<Work>();
  w->tenant = &tenant;
  w->spec.request_id = request_id;
  w->exec = std::make_shared<TaskExecutable>(std::move(task));
  w->job =
      std::make_shared<Job>("job-" + std::to_string(next_job_.fetch_add(1)), tenant.name, tenant.partition, request_id);
  std::shared_ptr<Job> job = submit_prepared(tenant, w, false);
  Job* j = job.get();  // the callback is the job's own: it cannot outlive it
  job->on_end([j, done = std::move(done)] { done(*j); });
  return job;
}

std::shared_ptr<Job> Engine::replay_async(Tenant& tenant, std::shared_ptr<ReplayPlan> plan,
                                          std::shared_ptr<GraphPool> pool, JobSpec spec,
                                          std::function<void(Job&)> done) {
  if (spec.spmd) {
    throw Error(ErrorCode::kBadRequest,
                "\"ranks\", per_rank or shard inputs in a replay of a graph captured without \"ranks\" "
                "(capture it with \"ranks\": API.md 8)");
  }
  auto w = std::make_shared<Work>();
  w->tenant = &tenant;
  w->exec = std::move(plan);  // it takes its pool's lease as it runs
  w->gate_pool = std::move(pool);
  w->spec = std::move(spec);
  return admit_replay(tenant, w, std::move(done));
}

std::shared_ptr<Job> Engine::replay_spmd_async(Tenant& tenant, std::shared_ptr<const SpmdGraph> graph, JobSpec spec,
                                               std::function<void(Job&)> done) {
  auto w = std::make_shared<Work>();
  w->tenant = &tenant;
  std::vector<std::shared_ptr<const CompiledProgram>> programs;
  for (const GraphMember& m : graph->members) programs.push_back(m.program);
  auto plan = std::make_shared<SpmdPlan>(
      plan_spmd_replay(spec, graph->ranks, graph->group, std::move(programs), ranks_->world()));
  for (size_t i = 0; i < plan->inputs.size(); ++i) {
    try {
      graph->members[i].plan->check_inputs(plan->inputs[i]);  // 409 before anything is queued
    } catch (const Error& e) {
      throw Error(e.code(), "rank " + std::to_string(graph->ranks[i]) + ": " + e.message(), e.node());
    }
  }
  w->gate_pool = graph->members[0].pool;
  spec.inputs.clear();  // split into the plan's
  if (spec.spmd) spec.spmd->inputs.clear();
  w->spec = std::move(spec);
  // Each member's replay plan on its rank (its own pool: the ranks run at
  // once; the first member's gate admits one replay). A member captured on
  // its rank's GPU launches its device graph (ReplayPlan::launch_on).
  const SpmdPlan* p = plan.get();
  auto member = [graph = std::move(graph), p](size_t i, const ExecOptions& o) {
    return graph->members[i].plan->run(p->inputs[i], o);
  };
  w->exec = spmd_executable(std::move(plan), w->spec, std::move(member));
  return admit_replay(tenant, w, std::move(done));
}

std::shared_ptr<Job> Engine::admit_replay(Tenant& tenant, const std::shared_ptr<Work>& w,
                                          std::function<void(Job&)> done) {
  prepare(tenant, w);  // validation errors throw here, before the gate
  std::shared_ptr<Job> job = w->job;
  Job* j = job.get();
  // The callback is the job's own; `w` keeps the pool and the plan (a
  // cycle through the job that its end breaks: on_end drops the callback).
  job->on_end([this, j, w, done = std::move(done)] {
    metrics_->graph_replayed(j->tenant(), std::string(job_state_name(j->state())));
    try {
      done(*j);
    } catch (...) {
      // The caller's answer failed: the gate must open all the same.
    }
    if (w->admitted.exchange(false)) w->gate_pool->gate().release();
  });
  // One replay of the pool at a time: the others wait at its gate, not on
  // a runner. A waiting replay is queued when the admitted one ends (on
  // that thread); refused then (shutdown, queue full), it fails with the
  // error, which answers its request.
  Tenant* t = &tenant;
  const bool now = w->gate_pool->gate().enter([this, t, w] {
    w->admitted.store(true);
    if (is_final(w->job->state())) {
      // Cancelled while it waited: its on_end ran, or runs now, and
      // whichever of the two takes `admitted` back opens the gate.
      if (w->admitted.exchange(false)) w->gate_pool->gate().release();
      return;
    }
    try {
      submit_prepared(*t, w, false);  // on the thread that ended the last one
    } catch (const Error& e) {
      w->job->fail(e);  // its on_end releases the gate
    } catch (const std::exception& e) {
      w->job->fail(Error(ErrorCode::kInternal, e.what()));
    }
  });
  if (now) {
    w->admitted.store(true);
    try {
      submit_prepared(tenant, w, true);
    } catch (...) {
      w->admitted.store(false);
      w->gate_pool->gate().release();
      throw;
    }
  }
  return job;
}

void Engine::run_on_ranks(const std::vector<int>& ranks, const std::string& group, const ExecOptions& base,
                          const std::function<void(size_t, const ExecOptions&)>& part) {
  auto plan = std::make_shared<SpmdPlan>();
  plan->ranks = ranks;
  plan->group = group;
  plan->inputs.resize(ranks.size());
  static const JobSpec kNoSpec;  // every member is local: nothing is forwarded
  auto member = [&part](size_t i, const ExecOptions& o) {
    part(i, o);
    return ExecResult{};
  };
  spmd_executable(std::move(plan), kNoSpec, member)->run({}, base);
}

void Engine::record_graph_capture(const Tenant& tenant, int live_graphs_delta) {
  metrics_->graph_captured(tenant.name, live_graphs_delta);
}

}  // namespace tensord
