// The run half of control flow (graphs/control_flow.h): one control-flow
// node run over its operands, its bodies run by the caller's BodyRunner
// (execute_control_flow in graphs/executor.h runs them as programs of their
// own), so this file calls nothing above it. Operands, slices and stacked
// results live in host memory; the bodies place their own nodes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graphs/control_flow.h"
#include "graphs/exec_options.h"

namespace tensord {

// Runs one body of the node (a compiled subprogram) over `args` and returns
// its outputs in host memory; its stored reads and writes are the job's.
using BodyRunner = std::function<std::vector<Tensor>(const CompiledProgram& body, const std::vector<Tensor>& args)>;

// Runs control-flow node `b`. Checks cancellation and the deadline at each
// iteration; a while_loop past max_iters throws deadline_exceeded.
std::vector<Tensor> run_control_flow(const BoundNode& b, const std::vector<Tensor>& operands, const ExecOptions& opts,
                                     const BodyRunner& run_body);

// A loop's checks at iteration `iter`: cancelled / deadline_exceeded.
void check_control_running(const ExecOptions& opts, const ControlFlow& cf, int64_t iter, const std::string& node);
// A while_loop whose condition still holds after max_iters trips.
[[noreturn]] void throw_past_max_iters(const ControlFlow& cf, const std::string& node);

// Process-wide switch for associative_scan's parallel path (default on);
// off, every associative_scan runs sequentially. For benchmarks and tests.
void set_associative_scan_parallel(bool on);
bool associative_scan_parallel();

}  // namespace tensord
