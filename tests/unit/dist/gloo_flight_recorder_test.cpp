// The flight recorder as GlooProcessGroup fills it: every collective with
// its sizes, dtypes and states, and the ring keeping the last entries.
#include <gtest/gtest.h>

#include <atomic>

#include "ops/dist/flight_recorder.h"
#include "dist_test_util.h"

namespace tensord::dist {
namespace {

using namespace testing;

TEST(GlooFlightRecorder, RecordsEveryCollectiveWithItsStates) {
  const int R = 2;
  Groups g = make_groups(R, 3000ms);
  std::atomic<bool> seen_started{false};
  on_ranks(R, [&](int r) {
    g[r].all_reduce(make<float>({2, 3}, std::vector<float>(6, 1.f)))->wait();
    g[r].all_gather(make<int64_t>({r + 1}, std::vector<int64_t>(static_cast<size_t>(r + 1), 7)))->wait();
    // Rank 1 comes late to seq 3: rank 0's entry shows started meanwhile.
    if (r == 1) {
      while (!seen_started) std::this_thread::sleep_for(5ms);
    }
    auto w = g[r].barrier();
    if (r == 0) {
      for (int i = 0; i < 400 && !seen_started; ++i) {
        auto d = g.recorders[0]->dump();
        if (d.entries.size() == 3 && d.entries[2].state() == CollectiveState::kStarted) {
          EXPECT_FALSE(d.entries[2].retired);
          EXPECT_EQ(d.groups[0].last_enqueued_collective, 3);
          EXPECT_EQ(d.groups[0].last_completed_collective, 2);
          seen_started = true;
        }
        std::this_thread::sleep_for(5ms);
      }
      EXPECT_TRUE(seen_started.load());
      seen_started = true;  // never leave rank 1 waiting
    }
    w->wait();
  });
  for (int r = 0; r < R; ++r) {
    auto d = g.recorders[static_cast<size_t>(r)]->dump();
    EXPECT_EQ(d.version, "2.10");
    EXPECT_EQ(d.rank, r);
    EXPECT_EQ(d.comm_lib_version, GlooProcessGroup::version());
    ASSERT_EQ(d.groups.size(), 1u);
    EXPECT_EQ(d.groups[0].name, "world");
    EXPECT_EQ(d.groups[0].ranks, (std::vector<int>{0, 1}));
    EXPECT_EQ(d.groups[0].last_enqueued_collective, 3);
    EXPECT_EQ(d.groups[0].last_started_collective, 3);
    EXPECT_EQ(d.groups[0].last_completed_collective, 3);
    ASSERT_EQ(d.entries.size(), 3u);
    const auto& ar = d.entries[0];
    EXPECT_EQ(ar.record_id, 0u);
    EXPECT_EQ(ar.collective_seq_id, 1u);
    EXPECT_EQ(ar.op_id, 1u);
    EXPECT_EQ(ar.profiling_name, "gloo:all_reduce");
    EXPECT_EQ(ar.pg_name, "world");
    EXPECT_EQ(ar.input_sizes, (std::vector<Shape>{{2, 3}}));
    EXPECT_EQ(ar.output_sizes, (std::vector<Shape>{{2, 3}}));
    EXPECT_EQ(ar.input_dtypes, (std::vector<DType>{DType::kFloat32}));
    EXPECT_EQ(ar.state(), CollectiveState::kCompleted);
    EXPECT_TRUE(ar.retired);
    EXPECT_EQ(ar.timeout_ms, 3000);
    EXPECT_LE(ar.time_created_ns, *ar.time_discovered_started_ns);
    EXPECT_LE(*ar.time_discovered_started_ns, *ar.time_discovered_completed_ns);
    // all_gather's output size is what the ranks sent (uneven: 1 + 2).
    const auto& ag = d.entries[1];
    EXPECT_EQ(ag.profiling_name, "gloo:all_gather");
    EXPECT_EQ(ag.input_sizes, (std::vector<Shape>{{r + 1}}));
    EXPECT_EQ(ag.output_sizes, (std::vector<Shape>{{3}}));
    EXPECT_EQ(d.entries[2].profiling_name, "gloo:barrier");
    EXPECT_TRUE(d.entries[2].input_sizes.empty());
  }
}

TEST(GlooFlightRecorder, KeepsTheLastEntriesOfTheRing) {
  const int R = 2;
  Groups g = make_groups(R, 3000ms, /*fr_capacity=*/4);
  on_ranks(R, [&](int r) {
    for (int i = 0; i < 6; ++i) g[r].all_reduce(make<int32_t>({1}, {i}))->wait();
  });
  auto d = g.recorders[1]->dump();
  ASSERT_EQ(d.entries.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(d.entries[i].record_id, i + 2);
    EXPECT_EQ(d.entries[i].collective_seq_id, i + 3);
  }
  EXPECT_EQ(d.groups[0].last_completed_collective, 6);
}

}  // namespace
}  // namespace tensord::dist
