// A fixed pool of worker threads (one per core by default) running
// parallel_for chunks. The calling thread works too, so a pool of size 1 has
// no extra thread. Many callers may run parallel_for concurrently; each call
// has its own chunk counter (no global lock on the per-chunk path).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tensord {

class ThreadPool {
 public:
  // threads <= 0: hardware concurrency. A non-empty `cpus` pins every worker
  // thread to that CPU set (best effort: ignored where the OS refuses); the
  // caller of parallel_for pins itself if it wants to (pin_current_thread).
  explicit ThreadPool(int threads, std::vector<int> cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  const std::vector<int>& cpus() const { return cpus_; }

  // Runs fn(begin, end) over [0, n) in chunks of at least `grain` elements;
  // returns when all chunks are done. Exceptions thrown by fn are rethrown
  // here (the first one wins).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Task;
  void worker_loop();
  static void run_chunks(Task& t);

  std::vector<int> cpus_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> tasks_;
  bool stop_ = false;
};

// Pins the calling thread to the given CPUs (pthread_setaffinity_np); false
// when `cpus` is empty or the OS refuses (e.g. CPUs outside the cpuset).
// Partition compute threads (pools and job runners) run at nice +5: the
// HTTP threads, which answer every tenant, then preempt a saturated
// partition's work at once, so a light tenant's latency holds while another
// tenant keeps its own partition busy (bench/isolation.py).
inline constexpr int kComputeNice = 5;
void yield_to_io_threads();

bool pin_current_thread(const std::vector<int>& cpus);

}  // namespace tensord
