// Control flow in programs (API.md 4.2): cond, while_loop, scan, map and
// associative_scan, as the compiler sees them. They are not registry ops:
// the compiler binds their operands and compiles their subprograms with the
// parent (validation, shape inference, memory plan) into the node
// (BoundNode::control); graphs/control_flow_run.h runs them. Semantics
// follow torch.cond and torch._higher_order_ops.{while_loop, scan, map,
// associative_scan}.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graphs/compiled_program.h"

namespace tensord {

enum class ControlKind { kCond, kWhileLoop, kScan, kMap, kAssociativeScan };

// associative_scan's parallel path (Hillis-Steele): combine_fn compiled
// again with a leading batch dim, one variant per level, where it batches
// (graphs/scan_batching.h says when). Made by inference; immutable apart
// from its counters.
struct ScanBatching {
  // Per level d = 1, 2, 4, ... < length: combine_fn over batches of
  // length - d. Empty when combine_fn does not batch (why_not says why) or
  // length < 2.
  std::vector<std::shared_ptr<const CompiledProgram>> levels;
  std::string why_not;
  // Counters (tests, benchmarks): combine_fn invocations, runs per path.
  mutable std::atomic<int64_t> combine_calls{0};
  mutable std::atomic<int64_t> parallel_runs{0};
  mutable std::atomic<int64_t> sequential_runs{0};
};

struct ControlFlow {
  ControlKind kind = ControlKind::kCond;
  // Source subprograms by key ("then", "else", "cond", "body", "combine_fn").
  std::map<std::string, std::shared_ptr<const Program>> programs;
  // The same, compiled against the operands' metas (filled by inference).
  std::map<std::string, std::shared_ptr<const CompiledProgram>> bodies;
  // Operand layout (all operands are in BoundNode::tensor_params[0]):
  //   cond:             [pred, operands...]
  //   while_loop:       [carries...]
  //   scan:             [init carries (n_carry)..., xs...]
  //   map:              [xs (n_sliced)..., extra args...]
  //   associative_scan: [xs...]
  size_t n_carry = 0;
  size_t n_sliced = 0;
  int64_t dim = 0;  // scan / associative_scan (normalized by inference); map: 0
  bool reverse = false;
  int64_t max_iters = 1000000;                   // while_loop
  int64_t length = 0;                            // scan / map / associative_scan: size along dim
  std::shared_ptr<const ScanBatching> batching;  // associative_scan (set by inference)
};

// "while_loop 'w'": the node as messages name it.
std::string control_flow_label(const ControlFlow& cf, const std::string& node);

// True for "cond", "while_loop", "scan", "map", "associative_scan".
bool is_control_flow_op(const std::string& op);

// A placeholder OpDef for a control-flow node (name only, no kernels), so
// that code reading BoundNode::op (metrics, messages) keeps working.
const OpDef* control_flow_op_def(const std::string& op);

// Parses the node's args and kwargs (no metas yet). Returns the flattened
// operand expressions (value names or inline tensors) in the layout above.
// Throws invalid_program / invalid_argument naming the node.
std::shared_ptr<const ControlFlow> parse_control_flow(const Node& n, std::vector<ArgExpr>* operands);

// Shape inference: compiles the subprograms against `operand_metas`, checks
// signatures (400 invalid_program naming the node) and returns the node's
// result metas. Replaces b.control with the compiled version.
std::vector<TensorMeta> infer_control_flow(BoundNode& b, const std::vector<TensorMeta>& operand_metas,
                                           const StoredLookup& stored);

}  // namespace tensord
