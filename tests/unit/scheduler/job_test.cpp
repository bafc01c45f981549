// Job (scheduler/job.h): what a client polling a job is shown.
#include "scheduler/job.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace tensord {
namespace {

// GET /v1/jobs/{id} shows a job as ended only once its end is recorded
// (on_final: metrics and the trace's run span), so a client that polls
// until "succeeded" and then reads /v1/trace finds the run span.
TEST(JobOnFinal, AClientSeesTheEndOnlyOnceItIsRecorded) {
  Job j("job-y", "t", "p");
  ASSERT_TRUE(j.start());
  std::atomic<bool> in_final{false}, release{false};
  j.set_on_final([&](const Job&) {
    in_final = true;
    while (!release) std::this_thread::yield();
  });
  std::thread ender([&] { j.succeed(JobResult{}); });
  while (!in_final) std::this_thread::yield();
  EXPECT_EQ(j.state(), JobState::kSucceeded);
  EXPECT_EQ(j.observed_state(), JobState::kRunning) << "its end is still being recorded";
  release = true;
  ender.join();
  EXPECT_EQ(j.observed_state(), JobState::kSucceeded);
}

}  // namespace
}  // namespace tensord
