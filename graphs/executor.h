// Runs a CompiledProgram on a backend. Values are released after their last
// use (the memory plan). Writes to stored tensors are returned, not applied:
// the caller commits them only if the whole program succeeded.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graphs/compiled_program.h"

namespace tensord {

struct ExecOptions {
  OpContext ctx;  // backend, device, account, pool
  const std::atomic<bool>* cancelled = nullptr;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Reads the tenant's stored tensors for ops with state (optimizers);
  // null: such ops see no stored tensors.
  std::function<std::optional<Tensor>(const std::string&)> stored_read;
  // Called after each node with its id, op, and seconds spent (metrics, traces).
  // After each node: its run time and the clock reading at its end.
  // `cp`: the program the node belongs to (the job's, or a control-flow
  // subprogram's).
  std::function<void(const CompiledProgram& cp, const BoundNode&, double seconds,
                     std::chrono::steady_clock::time_point end)>
      on_node;
  // Copy the program's outputs to host memory (a control-flow body, whose
  // caller slices and tests them on the host); else they stay where their
  // kernels put them (graphs/device_placement.h).
  bool host_outputs = false;
};

struct ExecResult {
  std::vector<std::pair<std::string, Tensor>> outputs;  // program outputs, in order
  // Stored name -> new value, in write order (a later write to a name
  // replaces an earlier one of the same job).
  std::vector<std::pair<std::string, Tensor>> stored_writes;
  // Stored tensors the job copied to its device, with the snapshot each
  // was copied from: the same values in the memory where the backend's
  // kernels read them (TensorStore::relocate keeps the copy, so the next
  // job does not copy again).
  struct Relocated {
    std::string name;
    Tensor from, to;
  };
  std::vector<Relocated> relocated;
};

// Inputs by name must match the compiled input metas (checked).
ExecResult execute_program(const CompiledProgram& cp, const std::map<std::string, Tensor>& inputs,
                           const ExecOptions& opts);

}  // namespace tensord
