// The elementwise op family: binary arithmetic, comparisons and logic,
// unary math, clamp/where, casts. Each part registers its own ops; the
// engine is elementwise_loop.h, the math ops/kernels/elementwise.h.
#include "ops/cpu/elementwise_family.h"
#include "ops/cpu/register.h"
#include "ops/error.h"
#include "ops/op_registry.h"

namespace tensord {

void register_elementwise_ops(OpRegistry& r) {
  cpu::register_elementwise_binary_ops(r);
  cpu::register_elementwise_compare_ops(r);
  cpu::register_elementwise_unary_ops(r);
  cpu::register_elementwise_cast_ops(r);
  // Kernels that are one engine loop over their operands (a replay may
  // record the loop, ops/recorded_block.h). Not `to` (may return its input)
  // nor copy_ (writes a stored tensor).
  for (const char* name :
       {"add", "sub", "mul",  "div",   "pow",         "maximum",    "minimum", "eq",          "ne",
        "lt",  "le",  "gt",   "ge",    "logical_and", "logical_or", "where",   "neg",         "abs",
        "exp", "log", "sqrt", "rsqrt", "relu",        "sigmoid",    "tanh",    "logical_not", "clamp"}) {
    OpDef* d = r.find_mutable(name);
    TENSORD_ASSERT(d != nullptr);
    d->records_blocks = true;
  }
}

}  // namespace tensord
