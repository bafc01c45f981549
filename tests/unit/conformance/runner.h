// Runs one case of the table: binds a Call to an op's params the way the
// program binder does, runs a backend's kernel on it (the CPU's on host
// memory, a device's on operands copied to its device, wrapped numbers
// left in host memory as placement leaves them), and compares outcomes.
#pragma once

#include <string>
#include <vector>

#include "ops/backend.h"
#include "ops/op_registry.h"
#include "tests/unit/conformance/conformance.h"

namespace tensord {
class ThreadPool;
}

namespace tensord::conformance {

// One (variant, dtype) of an op whose shape inference accepts it.
struct Planned {
  const Variant* variant = nullptr;
  DType dtype{};
  Call call;
  std::vector<TensorMeta> metas;  // inferred
};

// Binds by param name; omitted params take their defaults. Throws
// std::invalid_argument for a name the op does not have.
OpArgs<Tensor> bind(const OpDef& op, const Call& c);
OpArgs<TensorMeta> metas_of(const OpArgs<Tensor>& a);

// The calls of `cases` (each variant at each dtype it applies to) that
// shape inference accepts; a rejected (variant, dtype) is left out, with
// the reason in *rejected when given.
std::vector<Planned> plan(const OpDef& op, const OpCases& cases, std::vector<std::string>* rejected = nullptr);

// "" when shape inference accepts exactly cases.dtypes for the first
// variant, else the dtypes on which the table and the op disagree.
std::string check_accepted_dtypes(const OpDef& op, const OpCases& cases);

// Whether `backend`'s kernel takes the planned call (OpDef::accepts; true
// when the op has no such rule).
bool backend_accepts(const OpDef& op, const std::string& backend, const Planned& p);

// The CPU kernel on host memory, inline or on `pool`, `call.steps` times
// over a copy of call.stored. Kernel errors propagate.
Outcome run_cpu(const OpDef& op, const Call& call, Backend& cpu, ThreadPool* pool);
// `backend`'s kernel on its first device, on one stream, synchronised after
// each step; outputs and stored tensors copied back to the host.
Outcome run_device(const OpDef& op, const Call& call, Backend& backend);

// "" when the metas of `outs` are `metas` (dtype and shape).
std::string check_metas(const std::vector<Tensor>& outs, const std::vector<TensorMeta>& metas);
// "" when got matches want: same dtype and shape, values within `tol`
// (conformance.h).
std::string compare(const Tensor& got, const Tensor& want, const Tolerance& tol);
// compare() over the outputs listed (empty: all) and every stored tensor.
std::string compare(const Outcome& got, const Outcome& want, const Tolerance& tol,
                    const std::vector<size_t>& outputs = {});
// "" when both outcomes have the same bytes (determinism).
std::string bitwise_equal(const Outcome& a, const Outcome& b);
// "" when the call's tensors still hold `before`'s bytes (kernels write
// fresh outputs, never their operands).
std::string operands_unchanged(const Call& before, const Call& after);
Call deep_copy(const Call& c);

}  // namespace tensord::conformance
