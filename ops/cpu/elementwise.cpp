// The elementwise op family: binary arithmetic, comparisons and logic,
// unary math, clamp/where, casts. Each part registers its own ops; the
// engine is elementwise_loop.h, the math ops/kernels/elementwise.h.
#include "ops/cpu/elementwise_family.h"
#include "ops/cpu/register.h"
#include "ops/op_registry.h"

namespace tensord {

void register_elementwise_ops(OpRegistry& r) {
  cpu::register_elementwise_binary_ops(r);
  cpu::register_elementwise_compare_ops(r);
  cpu::register_elementwise_unary_ops(r);
  cpu::register_elementwise_cast_ops(r);
}

}  // namespace tensord
