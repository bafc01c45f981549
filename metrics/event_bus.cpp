#include "metrics/event_bus.h"

#include <algorithm>

namespace tensord {

std::vector<JobStateEvent> EventBus::Subscription::drain(bool& overflowed) {
  std::lock_guard lock(mu_);
  std::vector<JobStateEvent> out(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
  queue_.clear();
  overflowed = overflowed_;
  overflowed_ = false;
  return out;
}

bool EventBus::Subscription::push(const JobStateEvent& e) {
  std::lock_guard lock(mu_);
  if (queue_.size() >= capacity_) {
    overflowed_ = true;
    return false;
  }
  queue_.push_back(e);
  return queue_.size() == 1;
}

EventBus& EventBus::global() {
  static auto* bus = new EventBus();  // leaked: engine threads may publish during exit
  return *bus;
}

std::shared_ptr<EventBus::Subscription> EventBus::subscribe(size_t capacity, std::function<void()> notify) {
  auto sub = std::make_shared<Subscription>(capacity, std::move(notify));
  std::lock_guard lock(mu_);
  subs_.erase(std::remove_if(subs_.begin(), subs_.end(), [](const auto& w) { return w.expired(); }), subs_.end());
  subs_.push_back(sub);
  subscribers_.store(subs_.size(), std::memory_order_relaxed);
  return sub;
}

void EventBus::publish(const JobStateEvent& e) {
  std::vector<std::shared_ptr<Subscription>> live;
  {
    std::lock_guard lock(mu_);
    live.reserve(subs_.size());
    subs_.erase(std::remove_if(subs_.begin(), subs_.end(),
                               [&](const auto& w) {
                                 auto s = w.lock();
                                 if (!s) return true;
                                 live.push_back(std::move(s));
                                 return false;
                               }),
                subs_.end());
    subscribers_.store(subs_.size(), std::memory_order_relaxed);
  }
  for (const auto& s : live) {
    if (s->push(e) && s->notify_) s->notify_();
  }
}

}  // namespace tensord
