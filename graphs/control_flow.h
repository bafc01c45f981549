// Control flow in programs (API.md 4.2): cond, while_loop, scan, map and
// associative_scan. They are not registry ops: the compiler binds their
// operands, compiles their subprograms with the parent (validation, shape
// inference, memory plan) and the executor runs those compiled bodies.
// Semantics follow torch.cond and torch._higher_order_ops.{while_loop, scan,
// map, associative_scan}.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graphs/compiled_program.h"

namespace tensord {

struct ExecOptions;

enum class ControlKind { kCond, kWhileLoop, kScan, kMap, kAssociativeScan };

// associative_scan's parallel path (Hillis-Steele), decided and compiled
// with the node: combine_fn compiled again with a leading batch dim, one
// variant per level. It batches when every node of combine_fn is an
// elementwise op whose operands that depend on the inputs have the output's
// rank, with no stored reads or writes and no nested control flow, and each
// batched value is exactly the unbatched one with the batch dim in front.
// Otherwise the sequential algorithm runs. Immutable apart from its counters.
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

// Process-wide switch for associative_scan's parallel path (default on);
// off, every associative_scan runs sequentially. For benchmarks and tests.
void set_associative_scan_parallel(bool on);
bool associative_scan_parallel();

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

// Reads and writes of stored tensors while running a body (the parent's
// pending writes).
struct ControlFlowIO {
  std::function<std::optional<Tensor>(const std::string&)> read;
  std::function<void(const std::string&, Tensor)> write;
};

// A loop's checks at iteration `iter`: cancelled / deadline_exceeded.
void check_control_running(const ExecOptions& opts, const ControlFlow& cf, int64_t iter, const std::string& node);
// A while_loop whose condition still holds after max_iters trips.
[[noreturn]] void throw_past_max_iters(const ControlFlow& cf, const std::string& node);

// Runs a control-flow node. Checks cancellation and the deadline at each
// iteration; a while_loop past max_iters throws deadline_exceeded.
std::vector<Tensor> run_control_flow(const BoundNode& b, const std::vector<Tensor>& operands, const ExecOptions& opts,
                                     const ControlFlowIO& io);

}  // namespace tensord
