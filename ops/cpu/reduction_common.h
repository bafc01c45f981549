// Internal to the CPU reduction family (reduction*.cpp): the dim plan every
// reduction shares, the run-a-policy driver over ops/cpu/reduce_loop.h, and
// the registration functions of the family's parts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/convert.h"
#include "ops/cpu/reduce_loop.h"
#include "ops/graph_hooks.h"
#include "ops/op_registry.h"
#include "ops/recorded_block.h"
#include "ops/tensor.h"

namespace tensord::cpu {

void register_reduction_argmax(OpRegistry& r);  // argmax
void register_reduction_norm(OpRegistry& r);    // norm

ParamSpec reduce_param(std::string name, ParamKind kind, Attr def = {}, bool optional = false, bool kwarg_only = false);
TensorMeta reduce_meta(DType t, Shape s);
[[noreturn]] void reduce_invalid(const std::string& msg);

struct ReducePlan {
  std::vector<bool> reduced;  // per input dim
  Shape out_shape;
  int64_t count = 1;  // elements folded into each output
};

// dim: None, an int or an int list (negative allowed; None or [] = all
// dims). Bad or repeated dims are invalid_argument naming `op`.
ReducePlan plan_reduce(const char* op, const Shape& in, const Attr& dim, bool keepdim);
bool keepdim_of(const Attr& a);
// Reductions without an identity (amax, amin, inf-norms) reject empty folds.
void check_nonempty(const char* op, const Shape& in, const ReducePlan& p);
// x cast to dtype t (a fresh tensor), or x itself.
Tensor cast_input(const OpContext& ctx, const Tensor& x, DType t);

// finalize for sum (nothing) and mean (divide by the count), a plain value
// so that a replay can record it (below).
struct MeanFinalize {
  double count = 1;
  bool mean = false;
  template <class Acc>
  void operator()(Acc* a, int64_t n) const {
    if (mean) {
      for (int64_t i = 0; i < n; ++i) a[i] /= count;
    }
  }
};

// A fold of every element of a contiguous input into one output, as a
// block a graph replay calls directly (ops/recorded_block.h): the same
// reduce_contig, finalize and conversion reduce_dims and run_reduce do when
// A = B = 1 and R fits one task.
template <class P, class Fin>
struct FullFold {
  P p;
  Fin fin;
  DType acc_dtype;
  DType out_dtype;
};

template <class P, class Fin>
void full_fold_block(const void* state, void* out, const void* const* in, const int64_t*, int64_t n) {
  const auto& s = *static_cast<const FullFold<P, Fin>*>(state);
  typename P::Acc a = reduce_contig(s.p, static_cast<const typename P::Src*>(in[0]), n);
  s.fin(&a, 1);
  convert_elements(&a, s.acc_dtype, out, s.out_dtype, 1);
}

template <class P, class Fin>
void record_full_fold(BlockRecorder& rec, const P& p, const Fin& fin, const Tensor& x, DType acc_dtype,
                      const Tensor& out) {
  ++rec.calls;
  using S = FullFold<P, Fin>;
  if constexpr (std::is_trivially_copyable_v<S> && sizeof(S) <= RecordedBlock::kMaxState && alignof(S) <= 16) {
    if (out.numel() == 1 && x.numel() > 0 && x.numel() <= kReduceTask) {
      const S st{p, fin, acc_dtype, out.dtype()};
      RecordedBlock& b = rec.block;
      std::memcpy(b.state, &st, sizeof st);
      b.has_state = true;
      b.fn = &full_fold_block<P, Fin>;
      b.n_inputs = 1;
      b.out = out.data();
      b.out_elem = dtype_size(out.dtype());
      b.in[0] = x.data();
      b.in_elem[0] = sizeof(typename P::Src);
      b.stride[0] = 1;
      b.n = x.numel();
      b.out_count = 1;
      b.grain = b.n;
      b.rows = 1;
      b.row_len = b.n;
      return;
    }
  }
  rec.reject();
}

// Runs policy p over x into out. The accumulators (dtype acc_dtype) get
// `finalize` applied, then are converted to out's dtype (or written in
// place when the dtypes match).
template <class P, class Fin>
void run_reduce(const OpContext& ctx, const P& p, const Tensor& x, const ReducePlan& plan, DType acc_dtype,
                const Tensor& out, Fin finalize) {
  using Acc = typename P::Acc;
  using Src = typename P::Src;
  const int64_t n_out = out.numel();
  if (n_out == 0) return;
  if (BlockRecorder* rec = graph_recorder(ctx.graph)) record_full_fold(*rec, p, finalize, x, acc_dtype, out);
  const bool direct = acc_dtype == out.dtype();
  std::vector<Acc> tmp;
  Acc* acc = nullptr;
  if (direct) {
    acc = static_cast<Acc*>(out.data());
  } else {
    tmp.resize(static_cast<size_t>(n_out));
    acc = tmp.data();
  }
  if (x.numel() == 0) {
    std::fill(acc, acc + n_out, p.init());
  } else {
    reduce_dims(ctx, p, static_cast<const Src*>(x.data()), x.shape(), plan.reduced, acc);
  }
  finalize(acc, n_out);
  if (!direct) convert_elements(acc, acc_dtype, out.data(), out.dtype(), n_out);
}

struct NoFinalize {
  template <class Acc>
  void operator()(Acc*, int64_t) const {}
};
}  // namespace tensord::cpu
