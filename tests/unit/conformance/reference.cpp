#include "tests/unit/conformance/reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/convert.h"

namespace tensord::conformance::ref {

double value(const Tensor& t, int64_t i) {
  return load_as_double(t.dtype(), t.data(), i);
}

C cvalue(const Tensor& t, int64_t i) {
  return load_as_complex(t.dtype(), t.data(), i);
}

double round_to(DType d, double v) {
  alignas(16) unsigned char buf[16] = {};
  store_from_double(d, buf, 0, v);
  return load_as_double(d, buf, 0);
}

C round_to(DType d, C v) {
  alignas(16) unsigned char buf[16] = {};
  store_from_complex(d, buf, 0, v);
  return load_as_complex(d, buf, 0);
}

namespace {

template <class I>
void put(void* base, int64_t i, double v) {
  // Wraps like the kernels' integer arithmetic: through int64, then the
  // two's complement narrowing of static_cast. (NaN or a value past int64
  // is never an integer result; stored as 0 rather than undefined.)
  if (!(v >= -0x1p63 && v < 0x1p63)) v = 0;
  const auto w = static_cast<I>(static_cast<int64_t>(v));
  std::memcpy(static_cast<char*>(base) + static_cast<size_t>(i) * sizeof(I), &w, sizeof(I));
}

}  // namespace

void store(const Tensor& t, int64_t i, double v) {
  void* p = t.data();
  switch (t.dtype()) {
    case DType::kBool:
      static_cast<uint8_t*>(p)[i] = v != 0 ? 1 : 0;
      return;
    case DType::kUInt8:
      return put<uint8_t>(p, i, v);
    case DType::kInt8:
      return put<int8_t>(p, i, v);
    case DType::kInt16:
      return put<int16_t>(p, i, v);
    case DType::kInt32:
      return put<int32_t>(p, i, v);
    case DType::kInt64:
      return put<int64_t>(p, i, v);
    default:
      store_from_double(t.dtype(), p, i, v);
  }
}

void store(const Tensor& t, int64_t i, C v) {
  if (is_complex(t.dtype())) {
    store_from_complex(t.dtype(), t.data(), i, v);
  } else {
    store(t, i, v.real());
  }
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(s.size(), 0);
  for (size_t d = s.size(); d-- > 0;) {
    if (s[d] == 0) return idx;
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}

namespace {

// Linear index into operand `in` (right-aligned broadcast) of output
// element `idx`.
int64_t broadcast_index(const Shape& in, const Shape& out, const std::vector<int64_t>& idx) {
  int64_t lin = 0, stride = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    const size_t di = in.size() - 1 - k;
    const size_t dout = out.size() - 1 - k;
    const int64_t pos = in[di] == 1 ? 0 : idx[dout];
    lin += pos * stride;
    stride *= in[di];
  }
  return lin;
}

}  // namespace

Tensor elementwise(const TensorMeta& out, DType compute, const std::vector<Tensor>& ins, const RealFn& f,
                   const ComplexFn& cf, bool keep_numbers) {
  Tensor r = Tensor::zeros_host(out.dtype, out.shape);
  const bool cplx = is_complex(compute);
  EXPECT_TRUE(!cplx || cf) << "a complex reference needs a complex function";
  std::vector<double> xs(ins.size());
  std::vector<C> cs(ins.size());
  for (int64_t i = 0; i < r.numel(); ++i) {
    const auto idx = unravel(i, out.shape);
    for (size_t k = 0; k < ins.size(); ++k) {
      const int64_t j = broadcast_index(ins[k].shape(), out.shape, idx);
      const bool keep = keep_numbers && ins[k].meta().wrapped_number && dtype_category(compute) >= 2;
      if (cplx) {
        cs[k] = keep ? cvalue(ins[k], j) : round_to(compute, cvalue(ins[k], j));
      } else {
        xs[k] = keep ? value(ins[k], j) : round_to(compute, value(ins[k], j));
      }
    }
    if (cplx) {
      store(r, i, cf(cs.data()));
    } else {
      store(r, i, f(xs.data()));
    }
  }
  return r;
}

Tensor reduce(const Tensor& in, const TensorMeta& out, std::vector<int64_t> dims, const RealReduce& f,
              const ComplexReduce& cf) {
  const Shape& s = in.shape();
  const auto rank = static_cast<int64_t>(s.size());
  std::vector<bool> reduced(s.size(), dims.empty());
  for (int64_t d : dims) reduced[static_cast<size_t>(d < 0 ? d + rank : d)] = true;
  // The output's elements in order: the kept dims, row-major.
  Shape kept;
  for (size_t d = 0; d < s.size(); ++d) {
    if (!reduced[d]) kept.push_back(s[d]);
  }
  const auto kst = strides_of(kept);
  const int64_t nout = shape_numel(kept);
  std::vector<std::vector<double>> groups(static_cast<size_t>(nout));
  std::vector<std::vector<C>> cgroups(static_cast<size_t>(nout));
  const bool cplx = is_complex(in.dtype());
  for (int64_t i = 0; i < in.numel(); ++i) {
    const auto idx = unravel(i, s);
    int64_t o = 0;
    for (size_t d = 0, k = 0; d < s.size(); ++d) {
      if (!reduced[d]) o += idx[d] * kst[k++];
    }
    if (cplx) {
      cgroups[static_cast<size_t>(o)].push_back(cvalue(in, i));
    } else {
      groups[static_cast<size_t>(o)].push_back(value(in, i));
    }
  }
  Tensor r = Tensor::zeros_host(out.dtype, out.shape);
  EXPECT_EQ(r.numel(), nout) << "reduction reference: output " << out.str() << " for " << in.meta().str();
  for (int64_t o = 0; o < nout && o < r.numel(); ++o) {
    if (cplx) {
      EXPECT_TRUE(cf) << "a complex reduction reference needs a complex function";
      if (cf) store(r, o, cf(cgroups[static_cast<size_t>(o)]));
    } else {
      store(r, o, f(groups[static_cast<size_t>(o)]));
    }
  }
  return r;
}

}  // namespace tensord::conformance::ref
