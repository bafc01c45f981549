#include "ops/cpu/thread_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <exception>

namespace tensord {

struct ThreadPool::Task {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;
  int64_t chunk = 0;
  int64_t num_chunks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex err_mu;
  std::exception_ptr error;
  std::mutex done_mu;
  std::condition_variable done_cv;
};

ThreadPool::ThreadPool(int threads, std::vector<int> cpus) : cpus_(std::move(cpus)) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) {
    workers_.emplace_back([this] {
      if (!cpus_.empty()) {
        pin_current_thread(cpus_);
        yield_to_io_threads();
      }
      worker_loop();
    });
  }
}

void yield_to_io_threads() {
  // Raising one's own nice needs no privilege; failure is harmless.
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kComputeNice);
}

bool pin_current_thread(const std::vector<int>& cpus) {
  if (cpus.empty()) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_chunks(Task& t) {
  for (;;) {
    int64_t c = t.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= t.num_chunks) return;
    int64_t b = c * t.chunk;
    int64_t e = std::min(t.n, b + t.chunk);
    try {
      (*t.fn)(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lk(t.err_mu);
      if (!t.error) t.error = std::current_exception();
    }
    if (t.done.fetch_add(1, std::memory_order_acq_rel) + 1 == t.num_chunks) {
      std::lock_guard<std::mutex> lk(t.done_mu);
      t.done_cv.notify_all();
    }
  }
}

void ThreadPool::worker_loop() {
  for (;;) {
    std::shared_ptr<Task> t;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !tasks_.empty(); });
      if (stop_) return;
      t = tasks_.front();
      if (t->next.load(std::memory_order_relaxed) >= t->num_chunks) {
        tasks_.pop_front();
        continue;
      }
    }
    run_chunks(*t);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = static_cast<int64_t>(size()) * 4;
  int64_t num_chunks = std::min<int64_t>((n + grain - 1) / grain, max_chunks);
  if (workers_.empty() || num_chunks <= 1) {
    fn(0, n);
    return;
  }
  auto t = std::make_shared<Task>();
  t->fn = &fn;
  t->n = n;
  t->chunk = (n + num_chunks - 1) / num_chunks;
  t->num_chunks = (n + t->chunk - 1) / t->chunk;
  {
    std::lock_guard<std::mutex> lk(mu_);
    tasks_.push_back(t);
  }
  cv_.notify_all();
  run_chunks(*t);
  {
    std::unique_lock<std::mutex> lk(t->done_mu);
    t->done_cv.wait(lk, [&] { return t->done.load(std::memory_order_acquire) == t->num_chunks; });
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = std::find(tasks_.begin(), tasks_.end(), t);
    if (it != tasks_.end()) tasks_.erase(it);
  }
  if (t->error) std::rethrow_exception(t->error);
}

}  // namespace tensord
