// Engine::Work: one job as the engine carries it from submit to its runner
// (scheduler/engine.cpp) and from the replay and task entry points
// (scheduler/engine_replay.cpp): the job, its tenant, its request and what
// runs it. Private to the engine's files.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "graphs/executable.h"
#include "graphs/graph_pool.h"
#include "scheduler/engine.h"

namespace tensord {

struct Engine::Work {
  std::shared_ptr<Job> job;
  Tenant* tenant = nullptr;
  JobSpec spec;
  // What runs (graphs/executable.h): released as the job ends, before its
  // caller is woken.
  std::shared_ptr<Executable> exec;
  // A replay's pool: its gate admits one replay of the pool at a time
  // (admit_replay), `admitted` says this one holds it.
  std::shared_ptr<GraphPool> gate_pool;
  std::atomic<bool> admitted{false};
  Clock::time_point deadline = Clock::time_point::max();
  std::vector<std::string> returns;
  const CompiledProgram& program() const { return exec->program(); }
};

}  // namespace tensord
