// Runs `primary` until it fails in a way `falls_back` accepts, then
// `secondary` from that run on (that run included): a device graph whose
// capture the device refused (a kernel that allocated, a backend without
// capture) replays through the executor for the rest of the graph's life.
// Errors `falls_back` does not accept are thrown as they are.
//
// Thread-safety: as its members' (a replay's: under its pool's lease, one
// run at a time).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "graphs/executable.h"
#include "ops/error.h"

namespace tensord {

class FallbackExecutable final : public Executable {
 public:
  FallbackExecutable(std::shared_ptr<Executable> primary, std::shared_ptr<Executable> secondary,
                     std::function<bool(const Error&)> falls_back)
      : primary_(std::move(primary)), secondary_(std::move(secondary)), falls_back_(std::move(falls_back)) {}
  ExecResult run(const std::map<std::string, Tensor>& inputs, const ExecOptions& opts) override;
  const CompiledProgram& program() const override { return secondary_->program(); }
  // Whether the secondary runs from now on.
  bool fell_back() const { return fell_back_.load(std::memory_order_relaxed); }

 private:
  std::shared_ptr<Executable> primary_;
  std::shared_ptr<Executable> secondary_;
  std::function<bool(const Error&)> falls_back_;
  std::atomic<bool> fell_back_{false};
};

}  // namespace tensord
