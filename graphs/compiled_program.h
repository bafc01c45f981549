// A validated, bound, ordered and shape-inferred program with its memory
// plan. Built once by compile_program; run by execute_program (any number of
// times: a CompiledProgram is immutable and may be shared across threads).
#pragma once

#include <atomic>
#include <cstdint>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graphs/program.h"
#include "ops/op_registry.h"

namespace tensord {

struct ControlFlow;  // graphs/control_flow.h

struct ValueInfo {
  enum class Source { kInput, kStored, kConstant, kNode };
  Source source = Source::kNode;
  std::string name;  // input name, stored name, or node output name
  TensorMeta meta;
  int producer = -1;  // node index (kNode)
  int last_use = -1;  // last node index reading it; INT_MAX if a program output
};

struct BoundNode {
  std::string id;
  const OpDef* op = nullptr;
  std::vector<std::vector<int>> tensor_params;         // value ids per schema param
  std::vector<std::vector<std::string>> tensor_names;  // as written ("$stored/w", "x", "" inline)
  std::vector<Attr> attrs;                             // per schema param
  std::vector<int> outputs;                            // value ids (may be fewer than the op returns)
  // For in-place ops whose target is a stored tensor: its name; the node's
  // first result becomes that tensor's new value when the program commits.
  std::string writes_stored;
  // Control flow (cond, while_loop, scan, map, associative_scan): its
  // compiled bodies; `op` is then a placeholder and every operand is in
  // tensor_params[0]. Null for ordinary ops.
  std::shared_ptr<const ControlFlow> control;
};

// A number no other object has had: a copy takes a new one. What a cache
// keyed by a program object compares (the trace's tables, built from a
// program's nodes) instead of the program's contents, which a program
// freed and another built at the same address could share only by chance.
class ObjectSerial {
 public:
  ObjectSerial() : value_(next()) {}
  ObjectSerial(const ObjectSerial&) : value_(next()) {}
  ObjectSerial& operator=(const ObjectSerial&) {
    value_ = next();
    return *this;
  }
  ~ObjectSerial() = default;
  uint64_t value() const { return value_; }

 private:
  static uint64_t next() {
    static std::atomic<uint64_t> n{1};
    return n.fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t value_;
};

struct CompiledProgram {
  ObjectSerial serial;
  std::vector<ValueInfo> values;
  std::vector<Tensor> constants;                     // indexed like values; defined for kStored/kConstant
  std::vector<BoundNode> nodes;                      // topological order
  std::vector<std::pair<std::string, int>> inputs;   // name -> value id, declaration order
  std::vector<std::pair<std::string, int>> outputs;  // name -> value id
  std::map<std::string, int> by_name;                // every named value
  int64_t peak_bytes = 0;                            // memory plan: most bytes live at once (intermediates + outputs)
  // The sha256 of the program as its client sent it, where one did (a
  // captured graph's: its replays' job info reports it, as a run's does).
  std::string program_sha256;
};

// The op arguments of node `b` with every value id v bound to value_of(v)
// (a TensorMeta for inference, a Tensor to run).
template <class T, class ValueOf>
OpArgs<T> bind_node_args(const BoundNode& b, ValueOf&& value_of) {
  OpArgs<T> args;
  args.op = b.op;
  args.node = b.id;
  args.attrs = b.attrs;
  args.names = b.tensor_names;
  args.tensors.resize(b.tensor_params.size());
  for (size_t pi = 0; pi < b.tensor_params.size(); ++pi) {
    args.tensors[pi].reserve(b.tensor_params[pi].size());
    for (int v : b.tensor_params[pi]) args.tensors[pi].push_back(value_of(static_cast<size_t>(v)));
  }
  return args;
}

// The metas of cp's outputs, in order.
std::vector<TensorMeta> output_metas(const CompiledProgram& cp);
// Node `b`'s arguments as the metas of its values in `cp`.
OpArgs<TensorMeta> node_metas(const BoundNode& b, const CompiledProgram& cp);
// Whether `backend` has a kernel for op node `b` of `cp` that takes this
// call (OpDef::accepts; no accepts rule: every call).
bool kernel_takes(const BoundNode& b, const CompiledProgram& cp, std::string_view backend);

// Looks up a stored tensor by name (snapshot); nullopt if absent.
using StoredLookup = std::function<std::optional<Tensor>(const std::string& name)>;

// Validates (unique ids and value names, known ops, defined references, no
// cycles), binds args to schemas, orders the nodes, runs shape and dtype
// inference for the whole program and plans memory. Throws invalid_program /
// unknown_op / shape_mismatch / dtype_mismatch / invalid_argument / not_found
// with the node id. `input_metas` gives the inputs when the program does not
// declare them (or checks them when it does).
CompiledProgram compile_program(const Program& p, const std::map<std::string, TensorMeta>& input_metas,
                                const StoredLookup& stored);

}  // namespace tensord
