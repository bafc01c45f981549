// The one list of op families (ggml-backend-reg style).
#include "ops/cpu/register.h"
#include "ops/op_registry.h"

namespace tensord {

void register_all_ops(OpRegistry& r) {
  register_elementwise_ops(r);
  register_reduction_ops(r);
  register_shape_ops(r);
  register_creation_ops(r);
  register_linalg_ops(r);
  register_optim_ops(r);
  register_mx_ops(r);
}

}  // namespace tensord
