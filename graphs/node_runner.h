// The rules for running one node of a program, in one place, for every loop
// over nodes (execute_program, a replay plan's instructions, a control-flow
// node's trips, a device graph's capture and launch):
//  - before a node: stop if the job was cancelled or is past its deadline
//    (cancelled / deadline_exceeded naming the node);
//  - around its kernel (or a control-flow node's bodies): an error gets the
//    node's id, running out of memory is quota_exceeded;
//  - its results: at least one per output the node names, each of the dtype
//    and shape inference gave it (else internal: a kernel bug), plain
//    tensors from then on (a wrapped Python number's flag dropped);
//  - after it: its time, from the end of the node before it (binding and
//    placing its operands included), and the backend whose kernel ran it,
//    to ExecOptions::on_node (tensord_op_launches_total{backend} counts
//    what ran, not what the server was started with).
// What a caller does with the results (keep them, copy them into a plan's
// buffers, write stored tensors) is its own. The clock is read once per
// node, at its end: a second reading would be a large share of a replayed
// node's cost (bench/README.md, graphs).
//
// One NodeRunner per run of one program, on the job's thread.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "graphs/compiled_program.h"
#include "graphs/exec_options.h"
#include "ops/error.h"

namespace tensord {

// Throws cancelled ("job cancelled <where>") when `cancelled`, else
// deadline_exceeded ("deadline exceeded <where>"), naming `node`.
[[noreturn]] void throw_stopped(bool cancelled, const std::string& where, const std::string& node);

// The job's stop checks: cancelled, or past its deadline at `now`. `where()`
// ("before node 'n'", "in while_loop 'w' at iteration 3") is only built
// when the job stops.
template <class Where>
void check_running(const ExecOptions& opts, std::chrono::steady_clock::time_point now, const std::string& node,
                   Where&& where) {
  const bool cancelled = opts.ctx.cancelled && opts.ctx.cancelled->load(std::memory_order_relaxed);
  if (cancelled || now > opts.deadline) throw_stopped(cancelled, where(), node);
}

class NodeRunner {
 public:
  // `cp`: the program whose nodes run (on_node's argument). Reads the clock:
  // the first node's time starts here.
  NodeRunner(const CompiledProgram& cp, const ExecOptions& opts);

  // Before node `b`: cancelled / deadline_exceeded naming it (the deadline
  // against the end of the node before).
  void before(const BoundNode& b) const {
    check_running(opts_, last_, b.id, [&b] { return "before node '" + b.id + "'"; });
  }
  // Calls `fn` (node `b`'s kernel or bodies; returns its results) with its
  // failures mapped: an Error gets b's id, std::bad_alloc is quota_exceeded.
  template <class Fn>
  static std::vector<Tensor> call(const BoundNode& b, Fn&& fn) {
    try {
      return fn();
    } catch (...) {
      rethrow_for(b);
    }
  }
  // b's results against inference: too few, or another dtype or shape, is
  // internal; the wrapped-number flag is dropped from the named ones.
  void check_results(const BoundNode& b, std::vector<Tensor>& out) const;
  // The error for node `b` when `backend` has no kernel for its op.
  static Error unsupported(std::string_view backend, const BoundNode& b);
  // The backend a node runs on: "cpu" on the host (a CPU fallback beside a
  // device, a control-flow node), else the job's backend.
  std::string_view ran_on(bool host) const { return host ? std::string_view("cpu") : backend_; }
  // After node `b`, which ran on `backend` (ran_on()): its time and backend
  // to ExecOptions::on_node.
  void after(const BoundNode& b, std::string_view backend) {
    const auto now = std::chrono::steady_clock::now();
    if (opts_.on_node) opts_.on_node(cp_, b, std::chrono::duration<double>(now - last_).count(), now, backend);
    last_ = now;
  }

 private:
  // Inside a catch block: the current exception as call() maps it.
  [[noreturn]] static void rethrow_for(const BoundNode& b);

  const CompiledProgram& cp_;
  const ExecOptions& opts_;
  std::string_view backend_;  // opts_.ctx.backend's name, "cpu" without one
  std::chrono::steady_clock::time_point last_;
};

}  // namespace tensord
