// argmax(input, dim=None, keepdim=False) -> int64: the first maximum; a NaN
// counts as the maximum (its first occurrence wins), as in PyTorch.
#include <algorithm>
#include <string>
#include <vector>

#include "ops/cpu/reduction_common.h"
#include "ops/dispatch.h"
#include "ops/kernels/elementwise.h"
#include "ops/kernels/scalar_traits.h"

namespace tensord::cpu {
namespace {

using kernels::ScalarTraits;

struct ArgPlan {
  int64_t A = 1, R = 1, B = 1;
  Shape out_shape;
};

ArgPlan plan_argmax(const TensorMeta& x, const Attr& dim, bool keepdim) {
  ArgPlan p;
  if (is_complex(x.dtype)) reduce_invalid("argmax: complex inputs are not supported");
  const int64_t r = x.dim();
  if (dim.is_none()) {
    if (x.numel() == 0) reduce_invalid("argmax: expected reduction dim to be specified for input.numel() == 0");
    p.R = x.numel();
    if (keepdim) p.out_shape.assign(static_cast<size_t>(r), 1);
    return p;
  }
  const int64_t w = wrap_dim(dim.to_int("argmax: dim"), r, "argmax");
  for (int64_t i = 0; i < r; ++i) {
    const int64_t s = x.shape[static_cast<size_t>(i)];
    if (i < w) p.A *= s;
    if (i == w) p.R = s;
    if (i > w) p.B *= s;
    if (i != w || keepdim) p.out_shape.push_back(i == w ? 1 : s);
  }
  if (r > 0 && p.R == 0) {
    reduce_invalid("argmax: expected reduction dim " + std::to_string(w) + " to have non-zero size");
  }
  return p;
}

// First index of the maximum; a NaN counts as the maximum (its first
// occurrence wins).
template <class T>
void argmax_kernel(const OpContext& ctx, const T* x, const ArgPlan& p, int64_t* out) {
  using C = typename ScalarTraits<T>::compute_t;
  auto better = [](C v, C best) { return (kernels::is_nan(v) && !kernels::is_nan(best)) || v > best; };
  const int64_t A = p.A, R = p.R, B = p.B;
  if (A * B == 0) return;
  if (B == 1) {
    struct Best {
      C v;
      int64_t i;
    };
    const int64_t rblk = kReduceTask;
    const int64_t nrb = (R + rblk - 1) / rblk;
    std::vector<Best> part(static_cast<size_t>(A * nrb));
    ctx.parallel_for(A * nrb, std::max<int64_t>(1, kReduceTask / std::min(R, rblk)), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t a = t / nrb, r0 = (t % nrb) * rblk, r1 = std::min(R, r0 + rblk);
        const T* row = x + a * R;
        Best b{ScalarTraits<T>::load(row[r0]), r0};
        for (int64_t r = r0 + 1; r < r1; ++r) {
          const C v = ScalarTraits<T>::load(row[r]);
          if (better(v, b.v)) b = Best{v, r};
        }
        part[static_cast<size_t>(t)] = b;
      }
    });
    for (int64_t a = 0; a < A; ++a) {
      Best b = part[static_cast<size_t>(a * nrb)];
      for (int64_t rb = 1; rb < nrb; ++rb) {
        const Best& c = part[static_cast<size_t>(a * nrb + rb)];
        if (better(c.v, b.v)) b = c;
      }
      out[a] = b.i;
    }
    return;
  }
  const int64_t bc = std::min(B, kReduceCols);
  const int64_t nbc = (B + bc - 1) / bc;
  ctx.parallel_for(A * nbc, std::max<int64_t>(1, kReduceTask / std::max<int64_t>(1, R * bc)),
                   [&](int64_t t0, int64_t t1) {
                     C bv[kReduceCols];
                     int64_t bi[kReduceCols];
                     for (int64_t t = t0; t < t1; ++t) {
                       const int64_t a = t / nbc, b0 = (t % nbc) * bc, bn = std::min(bc, B - b0);
                       const T* base = x + a * R * B + b0;
                       for (int64_t b = 0; b < bn; ++b) {
                         bv[b] = ScalarTraits<T>::load(base[b]);
                         bi[b] = 0;
                       }
                       for (int64_t r = 1; r < R; ++r) {
                         const T* row = base + r * B;
                         for (int64_t b = 0; b < bn; ++b) {
                           const C v = ScalarTraits<T>::load(row[b]);
                           if (better(v, bv[b])) {
                             bv[b] = v;
                             bi[b] = r;
                           }
                         }
                       }
                       std::copy(bi, bi + bn, out + a * B + b0);
                     }
                   });
}

OpDef make_argmax() {
  OpDef d;
  d.name = "argmax";
  d.doc = "index of the first maximum along dim (of the flattened input when dim is None); NaN is the maximum";
  d.params = {reduce_param("input", ParamKind::kTensor), reduce_param("dim", ParamKind::kInt, {}, true),
              reduce_param("keepdim", ParamKind::kBool, Attr(false))};
  d.outputs = {"out"};
  d.dtypes = dtypes_without(dtypes_all(), dtypes_complex());
  d.dtype_note = "-> int64";
  d.infer = [](const OpArgs<TensorMeta>& a) {
    ArgPlan p = plan_argmax(a.tensor(0), a.attr(1), keepdim_of(a.attr(2)));
    return std::vector<TensorMeta>{reduce_meta(DType::kInt64, p.out_shape)};
  };
  d.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    ArgPlan p = plan_argmax(x.meta(), a.attr(1), keepdim_of(a.attr(2)));
    Tensor out = ctx.empty(DType::kInt64, p.out_shape);
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!kernels::kIsComplex<T>)
        argmax_kernel<T>(ctx, static_cast<const T*>(x.data()), p, out.data_ptr<int64_t>());
    });
    return std::vector<Tensor>{out};
  };
  return d;
}

}  // namespace

void register_reduction_argmax(OpRegistry& r) {
  r.add(make_argmax());
}

}  // namespace tensord::cpu
