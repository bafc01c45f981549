// One kind of work the engine runs, behind one call: a program through the
// executor (graphs/program_executable.h), a captured graph's replay under
// its pool's lease (graphs/replay_executable.h: the CPU replay plan, or a
// device graph that falls back to the executor, graphs/fallback_executable.h),
// an SPMD job over the world's ranks (scheduler/spmd/spmd_executable.h) and
// work that is not a program, such as a graph's capture
// (scheduler/task_executable.h). The engine picks none of them: it binds the
// options, calls run(), waits for the stream, and commits what came back
// (scheduler/engine.cpp).
//
// Thread-safety: each implementation says; run() is called by one runner
// at a time for a given job.
#pragma once

#include <algorithm>
#include <atomic>
#include <map>
#include <string>

#include "graphs/compiled_program.h"
#include "graphs/exec_options.h"
#include "graphs/executor.h"

namespace tensord {

// The program of work that is not one (a capture, a step over ranks that
// runs no program): no nodes, no outputs.
inline const CompiledProgram& empty_program() {
  static const CompiledProgram kNone;
  return kNone;
}

class Executable {
 public:
  virtual ~Executable() = default;
  // Runs once over `inputs` (by name) with the job's options. Outputs come
  // back in the program's order; writes to stored tensors are returned, not
  // applied (the engine commits them when the job succeeded).
  virtual ExecResult run(const std::map<std::string, Tensor>& inputs, const ExecOptions& opts) = 0;
  // The program whose outputs run() returns (which names `store` and
  // `return` may use; the trace's node names); an empty one for a task.
  virtual const CompiledProgram& program() const = 0;
  // False for work whose effects are its own (a capture stores its graph):
  // the engine commits nothing for it and answers no outputs.
  virtual bool commits() const { return true; }

  // How long its runs take lately: the engine reports each run's time
  // (ran_for) and this follows their peak, decaying by a tenth a run, so
  // one slow run is remembered for a while. The engine runs work that is
  // known to be short at once on the thread that submits it
  // (JobScheduler::submit_or_run); negative until it has run, as for work
  // made for one job (a /v1/run program, an SPMD step). Thread-safe.
  double typical_run_seconds() const { return typical_.load(std::memory_order_relaxed); }
  // An estimate before the first run (the engine's, for a program made
  // for one job: from its size); ignored once it has run.
  void expect_run_seconds(double seconds) {
    double unknown = -1.0;
    typical_.compare_exchange_strong(unknown, seconds, std::memory_order_relaxed);
  }
  void ran_for(double seconds) {
    const double t = typical_.load(std::memory_order_relaxed);
    // Two runs reporting at once may lose one report: it is an estimate.
    typical_.store(t < 0 ? seconds : std::max(seconds, 0.9 * t), std::memory_order_relaxed);
  }

 private:
  std::atomic<double> typical_{-1.0};
};

}  // namespace tensord
