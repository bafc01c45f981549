// Internal to the CPU reduction family (reduction*.cpp): the dim plan every
// reduction shares, the run-a-policy driver over ops/cpu/reduce_loop.h, and
// the registration functions of the family's parts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/convert.h"
#include "ops/cpu/reduce_loop.h"
#include "ops/op_registry.h"
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
