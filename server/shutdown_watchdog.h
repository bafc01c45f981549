// Bounds a shutdown whatever runs (API.md 10: the process is gone within
// --drain-timeout plus the checkpoint). Armed when the drain starts; if the
// main thread has not begun its final checkpoint `budget` + kSlack later
// (a thread stuck where no cancellation reaches), the watchdog writes the
// checkpoint itself and ends the process with 0; likewise if the process is
// still there kSlack after the final checkpoint.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace tensord {

class Checkpointer;

class ShutdownWatchdog {
 public:
  static constexpr std::chrono::seconds kSlack{5};

  ShutdownWatchdog(std::chrono::seconds budget, Checkpointer& checkpointer);
  ~ShutdownWatchdog();  // stops and joins the timer
  ShutdownWatchdog(const ShutdownWatchdog&) = delete;
  ShutdownWatchdog& operator=(const ShutdownWatchdog&) = delete;

  // Starts the countdown (the drain began). Idempotent; never blocks.
  void arm();
  // The final checkpoint's turn: true for the first caller (the main
  // thread, or the watchdog itself), which then writes it.
  bool begin_final_checkpoint();
  // The final checkpoint is written: from now on the process has kSlack to end.
  void end_final_checkpoint();
  // Flushes stderr and ends the process at once (no destructors: a thread
  // stuck in a kernel would block them).
  [[noreturn]] static void exit_now(int code);

 private:
  void run();

  const std::chrono::seconds budget_;
  Checkpointer& checkpointer_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false, stop_ = false, final_begun_ = false, final_done_ = false;
  std::thread thread_;
};

}  // namespace tensord
