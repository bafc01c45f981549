#include "graphs/node_runner.h"

#include <new>

#include "ops/backend.h"

namespace tensord {

void throw_stopped(bool cancelled, const std::string& where, const std::string& node) {
  if (cancelled) throw Error(ErrorCode::kCancelled, "job cancelled " + where, node);
  throw Error(ErrorCode::kDeadlineExceeded, "deadline exceeded " + where, node);
}

NodeRunner::NodeRunner(const CompiledProgram& cp, const ExecOptions& opts)
    : cp_(cp),
      opts_(opts),
      backend_(opts.ctx.backend ? opts.ctx.backend->name() : std::string_view("cpu")),
      last_(std::chrono::steady_clock::now()) {}

void NodeRunner::rethrow_for(const BoundNode& b) {
  try {
    throw;
  } catch (const Error& e) {
    throw e.with_node(b.id);
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::kQuotaExceeded, b.op->name + ": out of memory", b.id);
  }
}

Error NodeRunner::unsupported(std::string_view backend, const BoundNode& b) {
  return Error(ErrorCode::kUnsupported, "backend " + std::string(backend) + " does not support " + b.op->name, b.id);
}

void NodeRunner::check_results(const BoundNode& b, std::vector<Tensor>& out) const {
  if (out.size() < b.outputs.size()) {
    throw Error(ErrorCode::kInternal, b.op->name + ": kernel returned too few outputs", b.id);
  }
  for (size_t k = 0; k < b.outputs.size(); ++k) {
    const TensorMeta& want = cp_.values[static_cast<size_t>(b.outputs[k])].meta;
    if (out[k].dtype() != want.dtype || out[k].shape() != want.shape) {
      throw Error(ErrorCode::kInternal,
                  b.op->name + ": kernel result " + out[k].meta().str() + " differs from inferred " + want.str(), b.id);
    }
    out[k].set_wrapped_number(false);
  }
}

}  // namespace tensord
