// Thread handshakes for scheduler tests with real runner threads: no
// sleeps, a test waits for the state it needs.
#pragma once

#include <condition_variable>
#include <mutex>

namespace tensord::testing_util {

// Blocks jobs until opened; counts the jobs waiting on it.
class Gate {
 public:
  void wait() {
    std::unique_lock<std::mutex> lk(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lk, [&] { return open_; });
    --waiting_;
  }
  void wait_for_waiters(int n) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return waiting_ >= n; });
  }
  void open() {
    std::lock_guard<std::mutex> lk(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  bool open_ = false;
};

// Counts events and lets a test wait for a count.
class Counter {
 public:
  void add() {
    std::lock_guard<std::mutex> lk(mu_);
    ++n_;
    cv_.notify_all();
  }
  void wait_for(int n) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return n_ >= n; });
  }
  int get() {
    std::lock_guard<std::mutex> lk(mu_);
    return n_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_ = 0;
};

}  // namespace tensord::testing_util
