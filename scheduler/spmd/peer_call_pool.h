// The threads an SPMD job's calls to its peers run on (run_spmd, API.md 8):
// each call has a thread of its own while it runs, so a peer that stalls
// never holds another part's call (nor the job past its failure), and a
// thread that finished its call waits `idle` for the next one before it
// ends, so a steady stream of jobs reuses its threads instead of starting
// one per peer per job. The destructor runs the calls still queued and
// waits for those in flight (each ends when its peer answers or its
// deadline passes, SpmdPeers::run_part). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

namespace tensord {

class PeerCallPool {
 public:
  explicit PeerCallPool(std::chrono::milliseconds idle = std::chrono::seconds(30));
  ~PeerCallPool();
  PeerCallPool(const PeerCallPool&) = delete;
  PeerCallPool& operator=(const PeerCallPool&) = delete;

  // Runs `call` on a thread of the pool: an idle one, else a new one. What
  // it throws is dropped: a call reports through what it captured.
  void post(std::function<void()> call);
  // The threads alive now (running a call or idle), and those idle.
  size_t threads() const;
  size_t idle_threads() const;

 private:
  void work(std::list<std::thread>::iterator self);
  // Joins the threads that ended (idle past `idle_for_`); called with mu_ held.
  void join_ended(std::unique_lock<std::mutex>& lk);

  const std::chrono::milliseconds idle_for_;
  mutable std::mutex mu_;
  std::condition_variable wake_;  // a call queued, or stopping
  std::condition_variable ended_;
  std::deque<std::function<void()>> queue_;
  std::list<std::thread> threads_;
  std::vector<std::list<std::thread>::iterator> ended_threads_;
  size_t idle_ = 0;
  size_t live_ = 0;
  bool stop_ = false;
};

}  // namespace tensord
