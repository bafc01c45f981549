// Building blocks for the case table's independent references: values are
// read with the library's casts (ops/convert.h, tested on their own) and
// the arithmetic is done here in double or complex<double>, without the
// elementwise engine, the reduction loops or the kernels' headers.
#pragma once

#include <complex>
#include <cstdint>
#include <functional>
#include <vector>

#include "ops/tensor.h"

namespace tensord::conformance::ref {

using C = std::complex<double>;
using RealFn = std::function<double(const double*)>;
using ComplexFn = std::function<C(const C*)>;

// Element i as double / complex (complex: as read by ops/convert.h).
double value(const Tensor& t, int64_t i);
C cvalue(const Tensor& t, int64_t i);

// v as it reads back after a cast to `d` (narrow floats round to nearest
// even, integers truncate): an operand converted to the compute dtype.
double round_to(DType d, double v);
C round_to(DType d, C v);

// Stores v into element i of a host tensor: integers wrap modulo their
// width (int64 arithmetic, as the kernels' integer loops), bool is v != 0,
// floats round to nearest even.
void store(const Tensor& t, int64_t i, double v);
void store(const Tensor& t, int64_t i, C v);

// Broadcast elementwise reference: each operand is converted to `compute`
// (the promoted dtype the op computes in) and f sees one value per operand;
// complex compute uses cf. keep_numbers: a wrapped Python number keeps its
// precision when `compute` is floating (mul, true division and pow take it
// in float or double; the other ops see it cast to the dtype, as PyTorch's
// scalar ops do). The result is a fresh host tensor of meta `out`.
Tensor elementwise(const TensorMeta& out, DType compute, const std::vector<Tensor>& ins, const RealFn& f,
                   const ComplexFn& cf = nullptr, bool keep_numbers = false);

// Reduction reference: the elements of `in` grouped by the output element
// they reduce into (dims empty: all; negative dims wrap), each group
// reduced by f (real) or cf (complex input). `out` is the result's meta.
using RealReduce = std::function<double(const std::vector<double>&)>;
using ComplexReduce = std::function<C(const std::vector<C>&)>;
Tensor reduce(const Tensor& in, const TensorMeta& out, std::vector<int64_t> dims, const RealReduce& f,
              const ComplexReduce& cf = nullptr);

// Row-major strides of a shape and the multi-index of a linear index.
std::vector<int64_t> strides_of(const Shape& s);
std::vector<int64_t> unravel(int64_t i, const Shape& s);

}  // namespace tensord::conformance::ref
