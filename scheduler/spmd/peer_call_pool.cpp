#include "scheduler/spmd/peer_call_pool.h"

#include <utility>

namespace tensord {

PeerCallPool::PeerCallPool(std::chrono::milliseconds idle) : idle_for_(idle) {}

PeerCallPool::~PeerCallPool() {
  std::unique_lock lk(mu_);
  stop_ = true;
  wake_.notify_all();
  ended_.wait(lk, [this] { return live_ == 0; });
  std::list<std::thread> all = std::move(threads_);
  lk.unlock();
  for (auto& t : all) t.join();
}

void PeerCallPool::post(std::function<void()> call) {
  std::unique_lock lk(mu_);
  join_ended(lk);
  queue_.push_back(std::move(call));
  // Every queued call needs a thread of its own: one that is idle, or a new one.
  if (queue_.size() > idle_) {
    ++live_;
    threads_.emplace_front();
    auto self = threads_.begin();
    *self = std::thread([this, self] { work(self); });
  } else {
    wake_.notify_one();
  }
}

size_t PeerCallPool::threads() const {
  std::lock_guard lk(mu_);
  return live_;
}

size_t PeerCallPool::idle_threads() const {
  std::lock_guard lk(mu_);
  return idle_;
}

void PeerCallPool::join_ended(std::unique_lock<std::mutex>& lk) {
  if (ended_threads_.empty()) return;
  std::vector<std::thread> done;
  for (auto it : ended_threads_) {
    done.push_back(std::move(*it));
    threads_.erase(it);
  }
  ended_threads_.clear();
  // They have left work() or are leaving it: nothing they do needs mu_.
  lk.unlock();
  for (auto& t : done) t.join();
  lk.lock();
}

void PeerCallPool::work(std::list<std::thread>::iterator self) {
  std::unique_lock lk(mu_);
  for (;;) {
    ++idle_;
    const bool woke = wake_.wait_for(lk, idle_for_, [this] { return stop_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty()) {
      if (stop_ || !woke) break;
      continue;
    }
    std::function<void()> call = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    try {
      call();
    } catch (...) {
      // The call's own report (its captured state) says what happened.
    }
    call = nullptr;  // what it captured is released before the thread idles
    lk.lock();
  }
  --live_;
  ended_threads_.push_back(self);
  ended_.notify_all();
}

}  // namespace tensord
