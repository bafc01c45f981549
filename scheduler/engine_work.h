// Engine::Work: one job's request as the engine carries it from submit to
// its runner (scheduler/engine.cpp) and from the replay and task entry
// points (scheduler/engine_replay.cpp). Private to the engine's files.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graphs/compiled_program.h"
#include "graphs/exec_options.h"
#include "graphs/graph_pool.h"
#include "graphs/graph_store.h"
#include "graphs/replay_plan.h"
#include "scheduler/engine.h"
#include "scheduler/spmd_plan.h"

namespace tensord {

struct Engine::Work {
  std::shared_ptr<Job> job;
  Tenant* tenant = nullptr;
  JobSpec spec;
  CompiledProgram cp;
  std::shared_ptr<const CompiledProgram> shared_cp;  // a captured graph's program (replay)
  std::shared_ptr<ReplayPlan> plan;                  // and its replay plan (runs instead of the executor)
  std::shared_ptr<GraphPool> pool;                   // the plan's pool: its run mutex is held while it runs
  std::shared_ptr<const SpmdPlan> spmd;              // an SPMD job's ranks and their programs (instead of cp)
  std::shared_ptr<const SpmdGraph> spmd_graph;       // an SPMD graph's replay: its members' plans run
  std::atomic<bool> admitted{false};                 // holds the pool's gate (replay_async)
  Clock::time_point deadline = Clock::time_point::max();
  std::vector<std::string> returns;
  std::function<void(const ExecOptions&)> task;  // run_task_async: runs instead of a program
  const CompiledProgram& program() const {
    if (spmd) return *spmd->programs[0];
    return shared_cp ? *shared_cp : cp;
  }
};

}  // namespace tensord
