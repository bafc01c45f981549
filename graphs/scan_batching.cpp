#include "graphs/scan_batching.h"

#include <map>
#include <set>
#include <string>

#include "ops/error.h"

namespace tensord {
namespace {

// Ops that act elementwise (with right-aligned broadcasting), so that a
// leading batch dim on operands of the output's rank batches them.
bool batch_safe_op(const std::string& op) {
  static const std::set<std::string> ok = {
      "add", "sub",  "mul",   "div",     "pow",         "maximum",    "minimum",     "to",   "eq",  "ne",
      "lt",  "le",   "gt",    "ge",      "logical_and", "logical_or", "where",       "neg",  "abs", "exp",
      "log", "sqrt", "rsqrt", "sigmoid", "tanh",        "relu",       "logical_not", "clamp"};
  return ok.count(op) != 0;
}

// Why combine_fn cannot run batched regardless of the batch size, or "".
std::string batch_blocker(const CompiledProgram& cp) {
  for (const auto& v : cp.values) {
    if (v.source == ValueInfo::Source::kStored) return "reads stored tensor '" + v.name + "'";
  }
  for (const auto& b : cp.nodes) {
    if (b.control) return "node '" + b.id + "' is control flow";
    if (!b.writes_stored.empty()) return "node '" + b.id + "' writes a stored tensor";
    if (!b.op || !batch_safe_op(b.op->name)) {
      return "node '" + b.id + "' (" + (b.op ? b.op->name : std::string("?")) + ") is not elementwise";
    }
  }
  return "";
}

// Checks that `bcp` (combine_fn compiled with a leading batch dim of m on
// every input) computes, row by row, what `cp` computes: every value that
// depends on an input is the unbatched one with m in front (same dtype),
// every other value is unchanged, and operands that depend on an input have
// their node's output rank (so the batch dims line up under broadcasting).
std::string check_batched(const CompiledProgram& cp, const CompiledProgram& bcp, int64_t m) {
  std::map<std::string, const BoundNode*> unbatched;
  for (const auto& b : cp.nodes) unbatched[b.id] = &b;
  std::vector<bool> dep(bcp.values.size(), false);
  for (const auto& [name, id] : bcp.inputs) dep[static_cast<size_t>(id)] = true;
  for (const auto& b : bcp.nodes) {
    auto it = unbatched.find(b.id);
    if (it == unbatched.end() || it->second->outputs.size() != b.outputs.size()) return "node '" + b.id + "' differs";
    bool any_dep = false;
    for (const auto& ps : b.tensor_params) {
      for (int v : ps) any_dep = any_dep || dep[static_cast<size_t>(v)];
    }
    for (size_t k = 0; k < b.outputs.size(); ++k) {
      const TensorMeta& bm = bcp.values[static_cast<size_t>(b.outputs[k])].meta;
      TensorMeta want = cp.values[static_cast<size_t>(it->second->outputs[k])].meta;
      if (any_dep) want.shape.insert(want.shape.begin(), m);
      if (bm.dtype != want.dtype || bm.shape != want.shape) {
        return "node '" + b.id + "' gives " + bm.str() + " batched, expected " + want.str();
      }
      dep[static_cast<size_t>(b.outputs[k])] = any_dep;
      for (const auto& ps : b.tensor_params) {
        for (int v : ps) {
          if (dep[static_cast<size_t>(v)] && bcp.values[static_cast<size_t>(v)].meta.dim() != bm.dim()) {
            return "node '" + b.id + "' broadcasts an input-dependent operand across the batch dim";
          }
        }
      }
    }
  }
  if (bcp.outputs.size() != cp.outputs.size()) return "the outputs differ";
  for (size_t k = 0; k < cp.outputs.size(); ++k) {
    const TensorMeta& bm = bcp.values[static_cast<size_t>(bcp.outputs[k].second)].meta;
    TensorMeta want = cp.values[static_cast<size_t>(cp.outputs[k].second)].meta;
    want.shape.insert(want.shape.begin(), m);
    if (!dep[static_cast<size_t>(bcp.outputs[k].second)] || bm.dtype != want.dtype || bm.shape != want.shape) {
      return "output " + std::to_string(k) + " is " + bm.str() + " batched, expected " + want.str() +
             " (from the inputs)";
    }
  }
  return "";
}

std::shared_ptr<const CompiledProgram> compile_batched(const ControlFlow& cf, int64_t m) {
  Program p = *cf.programs.at("combine_fn");
  std::map<std::string, TensorMeta> im;
  for (auto& in : p.inputs) {
    in.meta.shape.insert(in.meta.shape.begin(), m);
    in.meta.wrapped_number = false;
    im[in.name] = in.meta;
  }
  return std::make_shared<const CompiledProgram>(compile_program(p, im, nullptr));
}

// The batched combine_fn variants for every Hillis-Steele level (batch sizes
// n - d for d = 1, 2, 4, ... < n), compiled on first use; empty when

}  // namespace

std::shared_ptr<const ScanBatching> plan_scan_batching(const ControlFlow& cf) {
  auto s = std::make_shared<ScanBatching>();
  if (cf.length < 2) return s;
  const CompiledProgram& cp = *cf.bodies.at("combine_fn");
  s->why_not = batch_blocker(cp);
  if (!s->why_not.empty()) return s;
  for (int64_t d = 1; d < cf.length; d *= 2) {
    const int64_t m = cf.length - d;
    std::shared_ptr<const CompiledProgram> bcp;
    std::string why;
    try {
      bcp = compile_batched(cf, m);
      why = check_batched(cp, *bcp, m);
    } catch (const Error& e) {
      why = "does not compile batched: " + e.message();
    }
    if (!why.empty()) {
      s->levels.clear();
      s->why_not = why;
      return s;
    }
    s->levels.push_back(std::move(bcp));
  }
  return s;
}

}  // namespace tensord
