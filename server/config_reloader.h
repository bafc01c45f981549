// Config reload on SIGHUP: re-read the --config file and apply what can
// change while serving (scheduler/config_reload.h says what). An invalid
// file, or one that cannot be applied, is logged and the running config
// stays in force. Counted in tensord_config_reloads_total{result="ok"|"error"}.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace tensord {

class Engine;
class TenantRegistry;
class Checkpointer;

struct ReloadTarget {
  std::string config_path;               // empty: no --config, nothing to reload
  Checkpointer* checkpointer = nullptr;  // restores new tenants' checkpoints (null: none)
  Engine* engine = nullptr;
  TenantRegistry* tenants = nullptr;
  // Called for each tenant a reload removed, after it is gone (its shared
  // memory regions are closed there).
  std::function<void(const std::string& tenant)> on_removed;
};

// Reads, plans and applies; true when applied. Logs every step to stderr.
// Call from one thread at a time (the SIGHUP watcher).
bool reload_config(const ReloadTarget& target);

// Installs the SIGHUP handler: it only writes a byte to a self-pipe (async-
// signal-safe, whichever thread takes the signal; libraries such as OpenBLAS
// start threads before main(), so blocking the signal is not enough). Call
// early in main(): from then on SIGHUP no longer ends the process, and one
// that arrives before the watcher starts waits in the pipe.
void install_reload_signal_handler();

// A thread that waits for SIGHUPs (the pipe) and calls `on_signal` for each
// (several pending signals: one call); the destructor stops and joins it.
class ReloadSignalWatcher {
 public:
  explicit ReloadSignalWatcher(std::function<void()> on_signal);
  ~ReloadSignalWatcher();
  ReloadSignalWatcher(const ReloadSignalWatcher&) = delete;
  ReloadSignalWatcher& operator=(const ReloadSignalWatcher&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tensord
