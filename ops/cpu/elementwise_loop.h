// The CPU elementwise engine: broadcasting by computed strides (0 on
// broadcast dims), dims coalesced so same-shape operands run as one flat
// loop, per-block dtype casting of inputs into the kernel's compute type,
// and ctx.parallel_for over the output.
//
// A kernel is a plain function over one block: out[i] = f(in0[i*s0], ...)
// for i < n, where each input stride s is 0 (broadcast) or 1. After
// coalescing every inner stride is one of those two (inputs are contiguous),
// so kernels specialise on them and the compiler vectorises the s == 1 case.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "ops/dtype.h"
#include "ops/op_registry.h"
#include "ops/recorded_block.h"
#include "ops/tensor.h"

namespace tensord::cpu {

// One block: out has n elements (contiguous); in[k] points at the first
// element of input k, which advances by in_stride[k] (0 or 1) per element.
using EwBlockFn = BlockFn;

struct EwInput {
  const Tensor* tensor = nullptr;
  // Element type the kernel reads. When it differs from the tensor's dtype
  // the engine casts block by block (convert_elements rules).
  DType kernel_dtype = DType::kFloat32;
  // When set to a dtype other than the tensor's and the kernel's, values
  // are first rounded to it: a float16 op reads an int32 operand as
  // int32 -> float16 -> float32, as PyTorch does.
  DType round_via = DType::kFloat32;
  bool has_round_via = false;
};

inline constexpr int kEwMaxInputs = 3;
inline constexpr int64_t kEwGrain = 32768;      // elements per task, cheap ops
inline constexpr int64_t kEwGrainHeavy = 4096;  // exp, tanh, pow...

// Runs fn over out's shape; each input broadcasts to it. `state` is passed
// to fn unchanged (the functor with its parameters). fn writes elements of
// `kernel_out`; when that is not out's dtype (a narrow-float result computed
// in float32) the engine stages blocks and rounds them into out.
//
// `state_size` is the functor's size when it may be copied bytewise into a
// graph replay's recording (ctx.recorder, ops/recorded_block.h), 0 for no
// state, kEwStateNotCopyable to refuse recording. The overload below fills
// it in from the functor's type.
inline constexpr size_t kEwStateNotCopyable = static_cast<size_t>(-1);
void ew_run(const OpContext& ctx, const Tensor& out, DType kernel_out, std::span<const EwInput> inputs, EwBlockFn fn,
            const void* state, int64_t grain = kEwGrain, size_t state_size = 0);

template <class Op>
void ew_run(const OpContext& ctx, const Tensor& out, DType kernel_out, std::span<const EwInput> inputs, EwBlockFn fn,
            const Op* op, int64_t grain = kEwGrain) {
  constexpr bool copyable = std::is_trivially_copyable_v<Op> && sizeof(Op) <= RecordedBlock::kMaxState &&
                            alignof(Op) <= alignof(std::max_align_t) && alignof(Op) <= 16;
  ew_run(ctx, out, kernel_out, inputs, fn, static_cast<const void*>(op), grain,
         copyable ? sizeof(Op) : kEwStateNotCopyable);
}

// Copies `src` cast to `out`'s dtype into out, broadcasting (copy_, to).
void ew_cast_copy(const OpContext& ctx, const Tensor& out, const Tensor& src);

// The kernel dtype that reads an operand of common dtype `t`: narrow floats
// (float16, bfloat16, float8) read as float32, others as themselves.
DType ew_compute_dtype(DType t);

// An EwInput reading `t` for an op whose common dtype is `common`.
// keep_scalar_precision: a one-element operand of a narrow-float op is read
// at full precision instead of being rounded to the narrow type first (what
// PyTorch's mul/div do with a scalar `other`: original_scalar_value).
EwInput ew_input(const Tensor& t, DType common, bool keep_scalar_precision = false);

}  // namespace tensord::cpu
