#include "server/shutdown_watchdog.h"

#include <cstdio>
#include <cstdlib>

#include "metrics/log.h"
#include "server/checkpointer.h"

namespace tensord {

ShutdownWatchdog::ShutdownWatchdog(std::chrono::seconds budget, Checkpointer& checkpointer)
    : budget_(budget), checkpointer_(checkpointer) {}

ShutdownWatchdog::~ShutdownWatchdog() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ShutdownWatchdog::arm() {
  std::lock_guard<std::mutex> lk(mu_);
  if (armed_ || stop_) return;
  armed_ = true;
  thread_ = std::thread([this] { run(); });
}

bool ShutdownWatchdog::begin_final_checkpoint() {
  std::lock_guard<std::mutex> lk(mu_);
  if (final_begun_) return false;
  final_begun_ = true;
  return true;
}

void ShutdownWatchdog::end_final_checkpoint() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    final_done_ = true;
  }
  cv_.notify_all();
}

void ShutdownWatchdog::exit_now(int code) {
  std::fflush(stderr);
  std::_Exit(code);
}

void ShutdownWatchdog::run() {
  std::unique_lock<std::mutex> lk(mu_);
  if (cv_.wait_for(lk, budget_ + kSlack, [this] { return stop_; })) return;
  if (!final_begun_) {
    final_begun_ = true;
    lk.unlock();
    log::error("shutdown is stuck past the drain timeout: checkpointing and exiting");
    checkpointer_.write_all("shutdown");
    exit_now(0);
  }
  // The main thread is checkpointing: its end is bounded by the I/O. Give
  // the process kSlack after it to end on its own.
  cv_.wait(lk, [this] { return stop_ || final_done_; });
  if (stop_) return;
  if (cv_.wait_for(lk, kSlack, [this] { return stop_; })) return;
  lk.unlock();
  log::error("the process did not end after its final checkpoint: exiting");
  exit_now(0);
}

}  // namespace tensord
