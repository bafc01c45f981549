// Where a group's members meet (scheduler/spmd/spmd_keys.h): a fresh
// generation after a failure, groups apart, and this run's keys apart from
// another run's in a store that outlives it.
#include "scheduler/spmd/spmd_keys.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace tensord {
namespace {

TEST(SpmdKeys, AFailureMovesTheGroupToAFreshGenerationAndNoOtherGroup) {
  SpmdKeys keys;
  const std::string world = keys.key("world", false);
  EXPECT_EQ(world.rfind("world#", 0), 0u) << world;
  EXPECT_EQ(keys.key("world", false), world) << "the same group meets at the same key";
  const std::string pair = keys.key("ranks:0,1", false);
  EXPECT_NE(pair, world);

  const std::string next = keys.key("world", true);
  EXPECT_NE(next, world);
  EXPECT_EQ(keys.key("world", false), next) << "the next job meets in the fresh generation";
  EXPECT_EQ(keys.key("ranks:0,1", false), pair) << "other groups keep theirs";
  EXPECT_EQ(next.substr(0, next.rfind('.')), world.substr(0, world.rfind('.'))) << "same boot id";
}

TEST(SpmdKeys, TwoRunsOfTheServerMeetAtDifferentKeys) {
  std::set<std::string> seen;
  for (int i = 0; i < 8; ++i) seen.insert(SpmdKeys().key("world", false));
  EXPECT_EQ(seen.size(), 8u) << "a boot id per run";
}

}  // namespace
}  // namespace tensord
