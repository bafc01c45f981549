// The flight recorder's ring (its JSON: tests/unit/api/flight_recorder_json_test.cpp).
#include "ops/dist/flight_recorder.h"

#include <gtest/gtest.h>

namespace tensord::dist {
namespace {

TEST(FlightRecorder, AnEvictedEntryIgnoresLateStateChanges) {
  FlightRecorder fr(0, 2);
  fr.register_group("world", "world", 0, {0});
  FlightRecord e;
  e.pg_name = "world";
  const uint64_t first = fr.record(e);
  fr.record(e);
  fr.record(e);  // evicts `first`
  fr.completed(first);
  auto d = fr.dump();
  ASSERT_EQ(d.entries.size(), 2u);
  for (const auto& x : d.entries) EXPECT_EQ(x.state(), CollectiveState::kScheduled);
}

}  // namespace
}  // namespace tensord::dist
