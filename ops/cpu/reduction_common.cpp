#include "ops/cpu/reduction_common.h"

#include <utility>

#include "ops/cpu/elementwise_loop.h"
#include "ops/error.h"

namespace tensord::cpu {

ParamSpec reduce_param(std::string name, ParamKind kind, Attr def, bool optional, bool kwarg_only) {
  ParamSpec p;
  p.name = std::move(name);
  p.kind = kind;
  p.default_value = std::move(def);
  p.optional = optional;
  p.kwarg_only = kwarg_only;
  return p;
}

TensorMeta reduce_meta(DType t, Shape s) {
  TensorMeta m;
  m.dtype = t;
  m.shape = std::move(s);
  return m;
}

void reduce_invalid(const std::string& msg) {
  throw Error(ErrorCode::kInvalidArgument, msg);
}

ReducePlan plan_reduce(const char* op, const Shape& in, const Attr& dim, bool keepdim) {
  const int64_t r = static_cast<int64_t>(in.size());
  ReducePlan p;
  p.reduced.assign(in.size(), false);
  std::vector<int64_t> dims;
  bool all = dim.is_none();
  if (!all) {
    const std::string what = std::string(op) + ": dim";
    dims = dim.to_int_list(what.c_str());
    all = dims.empty();
  }
  if (all) {
    p.reduced.assign(in.size(), true);
  } else {
    std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(r, 1)), false);
    for (int64_t d : dims) {
      const int64_t w = wrap_dim(d, r, op);
      if (seen[static_cast<size_t>(w)]) {
        reduce_invalid(std::string(op) + ": dim " + std::to_string(w) + " appears multiple times in the list of dims");
      }
      seen[static_cast<size_t>(w)] = true;
      if (r > 0) p.reduced[static_cast<size_t>(w)] = true;
    }
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (p.reduced[i]) {
      p.count *= in[i];
      if (keepdim) p.out_shape.push_back(1);
    } else {
      p.out_shape.push_back(in[i]);
    }
  }
  return p;
}

bool keepdim_of(const Attr& a) {
  return !a.is_none() && a.to_bool("keepdim");
}

void check_nonempty(const char* op, const Shape& in, const ReducePlan& p) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (p.reduced[i] && in[i] == 0) {
      reduce_invalid(std::string(op) + ": expected reduction dim " + std::to_string(i) +
                     " to have non-zero size (the operation has no identity)");
    }
  }
}

Tensor cast_input(const OpContext& ctx, const Tensor& x, DType t) {
  if (x.dtype() == t) return x;
  Tensor c = ctx.empty(t, x.shape());
  ew_cast_copy(ctx, c, x);
  return c;
}

}  // namespace tensord::cpu
