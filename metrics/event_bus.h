// A small pub/sub for job state changes (GET /v1/stream's "jobs" stream).
// The engine publishes on its own threads; each subscriber has a bounded
// queue and a notify callback, called (outside every lock) when its queue
// goes from empty to non-empty, so a consumer drains in batches on its own
// executor. A full queue drops the event and marks the subscription
// overflowed: a slow consumer never makes the engine wait or grow memory.
// Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tensord {

struct JobStateEvent {
  std::string id;     // "job-17"
  std::string state;  // queued, running, succeeded, failed, cancelled
  std::string tenant;
  std::string partition;
  double queue_ms = 0;
  double run_ms = 0;
};

class EventBus {
 public:
  class Subscription {
   public:
    Subscription(size_t capacity, std::function<void()> notify) : capacity_(capacity), notify_(std::move(notify)) {}
    // Takes every queued event; sets `overflowed` when events were dropped
    // since the last drain.
    std::vector<JobStateEvent> drain(bool& overflowed);

   private:
    friend class EventBus;
    // Returns true when the consumer must be notified.
    bool push(const JobStateEvent& e);
    const size_t capacity_;
    std::function<void()> notify_;
    std::mutex mu_;
    std::deque<JobStateEvent> queue_;
    bool overflowed_ = false;
  };

  static EventBus& global();

  // Dropping the returned pointer unsubscribes.
  std::shared_ptr<Subscription> subscribe(size_t capacity, std::function<void()> notify);
  // Cheap check before building an event.
  bool has_subscribers() const { return subscribers_.load(std::memory_order_relaxed) > 0; }
  void publish(const JobStateEvent& e);

 private:
  std::mutex mu_;
  std::vector<std::weak_ptr<Subscription>> subs_;
  std::atomic<size_t> subscribers_{0};
};

}  // namespace tensord
