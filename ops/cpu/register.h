// Registration functions of the CPU op families. Each adds OpDefs (schema,
// dtype rule, shape inference, "cpu" kernel) to the registry.
#pragma once

namespace tensord {
class OpRegistry;

void register_elementwise_ops(OpRegistry& r);  // add ... logical_not, to, copy_
void register_reduction_ops(OpRegistry& r);    // sum mean amax amin argmax norm
void register_shape_ops(OpRegistry& r);        // reshape permute transpose cat stack getitem
void register_creation_ops(OpRegistry& r);     // full zeros ones arange randn rand
void register_linalg_ops(OpRegistry& r);       // matmul linalg.eigh linalg.eigvalsh
void register_optim_ops(OpRegistry& r);        // optim.sgd optim.adam optim.adamw optim.adagrad optim.muon
void register_mx_ops(OpRegistry& r);           // mx.quantize mx.dequantize
}  // namespace tensord
