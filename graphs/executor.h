// Runs a CompiledProgram on a backend. Values are released after their last
// use (the memory plan). Writes to stored tensors are returned, not applied:
// the caller commits them only if the whole program succeeded.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graphs/compiled_program.h"
#include "graphs/exec_options.h"

namespace tensord {

class PendingStore;

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
  // An SPMD job's (scheduler/spmd/spmd_executable.h), indexed like
  // `outputs`: the value of every member this server answers for, in the
  // group's order, of each output that differs across ranks; empty for a
  // replicated one (its value is in `outputs`).
  bool spmd = false;
  std::vector<std::vector<Tensor>> per_rank;
};

// Inputs by name must match the compiled input metas (checked).
ExecResult execute_program(const CompiledProgram& cp, const std::map<std::string, Tensor>& inputs,
                           const ExecOptions& opts);

// Runs control-flow node `b` over `operands` (graphs/control_flow_run.h),
// each body through execute_program with host outputs, its stored reads
// and writes through `pending` (the job's).
std::vector<Tensor> execute_control_flow(const BoundNode& b, const std::vector<Tensor>& operands,
                                         const ExecOptions& opts, PendingStore& pending);

}  // namespace tensord
