// Runs a job to its end through the engine's asynchronous API, as the
// server does (Engine::run_async), and waits on the job: its result, or
// its error thrown. Tests that want a job's result in one call use this.
#pragma once

#include <memory>
#include <utility>

#include "scheduler/engine.h"
#include "scheduler/job.h"

namespace tensord::testing_util {

inline JobResult run_job(Engine& e, Tenant& t, JobSpec spec) {
  std::shared_ptr<Job> job = e.run_async(t, std::move(spec), [](Job&) {});
  job->wait();
  return Engine::result_of(*job);
}

}  // namespace tensord::testing_util
