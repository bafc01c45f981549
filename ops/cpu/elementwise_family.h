// Internal to the CPU elementwise family: the registration functions of its
// parts (register_elementwise_ops in elementwise.cpp calls them all) and the
// schema helpers they share.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ops/op_registry.h"
#include "ops/shape.h"
#include "ops/tensor.h"

namespace tensord::cpu {

void register_elementwise_binary_ops(OpRegistry& r);   // add sub mul div pow maximum minimum
void register_elementwise_compare_ops(OpRegistry& r);  // eq ne lt le gt ge logical_and logical_or where
void register_elementwise_unary_ops(OpRegistry& r);    // neg abs exp log sqrt rsqrt relu sigmoid tanh logical_not clamp
void register_elementwise_cast_ops(OpRegistry& r);     // to copy_

inline ParamSpec ew_param(std::string name, ParamKind kind, Attr def = {}, bool optional = false,
                          bool kwarg_only = false) {
  ParamSpec p;
  p.name = std::move(name);
  p.kind = kind;
  p.default_value = std::move(def);
  p.optional = optional;
  p.kwarg_only = kwarg_only;
  return p;
}

inline TensorMeta ew_meta(DType dtype, Shape shape) {
  TensorMeta m;
  m.dtype = dtype;
  m.shape = std::move(shape);
  return m;
}

// Metas of a kernel's tensors, for re-deriving the plan infer computed.
template <class... Ts>
std::vector<TensorMeta> ew_metas(const Ts&... ts) {
  return {ts.meta()...};
}

}  // namespace tensord::cpu
