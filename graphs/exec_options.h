// What a run of a program's nodes takes (execute_program, a replay plan, a
// control-flow node's bodies): where its kernels run, when it must stop,
// how it reads stored tensors, and who hears about each node.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "ops/op_registry.h"

namespace tensord {

struct BoundNode;
struct CompiledProgram;

struct ExecOptions {
  // Backend, device, account, pool; its `cancelled` is the job's one cancel
  // flag, polled at node boundaries and by kernels in long loops.
  OpContext ctx;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Reads the tenant's stored tensors for ops with state (optimizers);
  // null: such ops see no stored tensors.
  std::function<std::optional<Tensor>(const std::string&)> stored_read;
  // After each node (metrics, traces): its run time, from the end of the
  // node before it, and the clock reading at its end. `cp`: the program the
  // node belongs to (the job's, or a control-flow subprogram's). `backend`:
  // the backend whose kernel ran it ("cpu" for a CPU fallback beside a
  // device, and for a control-flow node, which the host drives); a name
  // with static lifetime (Backend::name()).
  std::function<void(const CompiledProgram& cp, const BoundNode&, double seconds,
                     std::chrono::steady_clock::time_point end, std::string_view backend)>
      on_node;
  // Copy the program's outputs to host memory (a control-flow body, whose
  // caller slices and tests them on the host); else they stay where their
  // kernels put them (graphs/device_placement.h).
  bool host_outputs = false;
};

}  // namespace tensord
