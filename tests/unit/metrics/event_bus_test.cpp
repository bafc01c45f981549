#include "metrics/event_bus.h"

#include <gtest/gtest.h>

#include <atomic>

namespace tensord {
namespace {

JobStateEvent ev(const std::string& id, const std::string& state) {
  JobStateEvent e;
  e.id = id;
  e.state = state;
  e.tenant = "alice";
  e.partition = "p";
  return e;
}

TEST(EventBus, DeliversToEverySubscriberAndNotifiesOncePerBatch) {
  EventBus bus;
  EXPECT_FALSE(bus.has_subscribers());
  int notified_a = 0, notified_b = 0;
  auto a = bus.subscribe(8, [&] { ++notified_a; });
  auto b = bus.subscribe(8, [&] { ++notified_b; });
  EXPECT_TRUE(bus.has_subscribers());
  bus.publish(ev("job-1", "queued"));
  bus.publish(ev("job-1", "running"));
  EXPECT_EQ(notified_a, 1);  // empty -> non-empty only
  bool overflow = true;
  auto got = a->drain(overflow);
  EXPECT_FALSE(overflow);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].state, "running");
  bus.publish(ev("job-1", "succeeded"));
  EXPECT_EQ(notified_a, 2);
  EXPECT_EQ(notified_b, 1);
  EXPECT_EQ(b->drain(overflow).size(), 3u);
}

TEST(EventBus, AFullQueueDropsAndReportsOverflow) {
  EventBus bus;
  auto s = bus.subscribe(2, {});
  for (int i = 0; i < 5; ++i) bus.publish(ev("job-" + std::to_string(i), "queued"));
  bool overflow = false;
  auto got = s->drain(overflow);
  EXPECT_TRUE(overflow);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].id, "job-0");
  s->drain(overflow);
  EXPECT_FALSE(overflow);  // reported once
}

TEST(EventBus, DroppingTheSubscriptionUnsubscribes) {
  EventBus bus;
  std::atomic<int> calls{0};
  auto s = bus.subscribe(4, [&] { ++calls; });
  s.reset();
  bus.publish(ev("job-1", "queued"));
  EXPECT_EQ(calls.load(), 0);
  EXPECT_FALSE(bus.has_subscribers());
}

}  // namespace
}  // namespace tensord
