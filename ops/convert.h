// Element-wise dtype conversion on host memory, with PyTorch's cast rules:
// float -> int truncates toward zero (NaN -> 0, out of range saturates to
// the type's limits instead of C++'s undefined behaviour); anything -> bool
// is "!= 0"; complex -> real takes the real part; narrow floats round to
// nearest even (ops/kernels/float_conv.h).
#pragma once

#include <complex>
#include <cstdint>

#include "ops/dtype.h"

namespace tensord {

// Converts n elements from (src, st) to (dst, dt). src and dst must not overlap
// unless st == dt.
void convert_elements(const void* src, DType st, void* dst, DType dt, int64_t n);

// Element i of a buffer as double (complex: the real part) / as complex.
double load_as_double(DType t, const void* base, int64_t i);
std::complex<double> load_as_complex(DType t, const void* base, int64_t i);
// Stores v into element i with the cast rules above.
void store_from_double(DType t, void* base, int64_t i, double v);
void store_from_complex(DType t, void* base, int64_t i, std::complex<double> v);

}  // namespace tensord
