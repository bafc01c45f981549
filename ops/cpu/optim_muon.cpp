// Muon on the CPU (torch.optim.Muon, PyTorch 2.9): momentum, Newton-Schulz
// orthogonalisation of the (wide-form, Frobenius-normalised) update, then
// decoupled weight decay and the shape-adjusted step.
//
// Precision: PyTorch runs Newton-Schulz in bfloat16; this runs it in the
// parameter's math type (float32 with cblas_sgemm for float32, bfloat16 and
// float16 parameters; float64 with dgemm for float64), with the Frobenius
// norm accumulated in double. tests/integration/test_optim.py compares it with
// a float64 reference of the same algorithm.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/optim_loop.h"
#include "ops/kernels/float_conv.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

template <class M>
M load_elem(DType d, const void* base, int64_t i) {
  switch (d) {
    case DType::kFloat32:
      return static_cast<M>(static_cast<const float*>(base)[i]);
    case DType::kFloat64:
      return static_cast<M>(static_cast<const double*>(base)[i]);
    case DType::kBFloat16:
      return static_cast<M>(kernels::bf16_to_f32(static_cast<const uint16_t*>(base)[i]));
    default:
      return static_cast<M>(kernels::f16_to_f32(static_cast<const uint16_t*>(base)[i]));
  }
}

template <class M>
void store_elem(DType d, void* base, int64_t i, M v) {
  switch (d) {
    case DType::kFloat32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      return;
    case DType::kFloat64:
      static_cast<double*>(base)[i] = static_cast<double>(v);
      return;
    case DType::kBFloat16:
      static_cast<uint16_t*>(base)[i] = kernels::f32_to_bf16(static_cast<float>(v));
      return;
    default:
      static_cast<uint16_t*>(base)[i] = kernels::f32_to_f16(static_cast<float>(v));
      return;
  }
}

// C = alpha * A(m x k) * op(B) + beta * C, row-major.
void gemm(bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b, float beta, float* c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, k, b,
              trans_b ? k : n, beta, c, n);
}
void gemm(bool trans_b, int m, int n, int k, double alpha, const double* a, const double* b, double beta, double* c) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, k, b,
              trans_b ? k : n, beta, c, n);
}

// X (m x n, m <= n) <- Newton-Schulz(X / max(||X||_F, eps)), in place.
template <class M>
void newton_schulz(const kernels::MuonHyper& h, std::vector<M>& x, int m, int n) {
  double sq = 0;
  for (M v : x) sq += static_cast<double>(v) * static_cast<double>(v);
  const M norm = static_cast<M>(std::max(std::sqrt(sq), h.eps));
  for (M& v : x) v = v / norm;
  std::vector<M> y(x.size()), gram(static_cast<size_t>(m) * m), upd(static_cast<size_t>(m) * m);
  const M a = static_cast<M>(h.ns_a), b = static_cast<M>(h.ns_b), c = static_cast<M>(h.ns_c);
  for (int it = 0; it < h.ns_steps; ++it) {
    gemm(true, m, m, n, M(1), x.data(), x.data(), M(0), gram.data());  // X X^T
    upd = gram;
    gemm(false, m, m, m, c, gram.data(), gram.data(), b, upd.data());  // b*G + c*G*G
    y = x;
    gemm(false, m, n, m, M(1), upd.data(), x.data(), a, y.data());  // a*X + upd*X
    x.swap(y);
  }
}

template <class M>
void muon_one(const kernels::MuonHyper& h, const OptimTensorIO& io, int64_t rows, int64_t cols) {
  const kernels::MuonScalars<M> s = kernels::muon_scalars<M>(h, static_cast<double>(rows), static_cast<double>(cols));
  const bool tall = rows > cols;
  const int64_t m = tall ? cols : rows, n = tall ? rows : cols;
  std::vector<M> x(static_cast<size_t>(io.numel));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      M buf = io.state_in[0] ? load_elem<M>(io.dtype, io.state_in[0], i) : static_cast<M>(io.state_init[0]);
      const M g = load_elem<M>(io.dtype, io.grad, i);
      const M u = h.nesterov ? kernels::muon_momentum<M, true>(g, buf, s) : kernels::muon_momentum<M, false>(g, buf, s);
      store_elem<M>(io.dtype, io.state_out[0], i, buf);
      x[static_cast<size_t>(tall ? c * rows + r : i)] = u;
    }
  }
  newton_schulz<M>(h, x, static_cast<int>(m), static_cast<int>(n));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      const M o = x[static_cast<size_t>(tall ? c * rows + r : i)];
      store_elem<M>(io.dtype, io.param_out, i, kernels::muon_apply<M>(load_elem<M>(io.dtype, io.param, i), o, s));
    }
  }
}

}  // namespace

void fused_muon_cpu(const OpContext& ctx, const kernels::MuonHyper& h, const std::vector<OptimTensorIO>& ts,
                    const std::vector<int64_t>& rows, const std::vector<int64_t>& cols) {
  ctx.parallel_for(static_cast<int64_t>(ts.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const auto k = static_cast<size_t>(i);
      if (ts[k].numel == 0) continue;
      if (ts[k].dtype == DType::kFloat64) {
        muon_one<double>(h, ts[k], rows[k], cols[k]);
      } else {
        muon_one<float>(h, ts[k], rows[k], cols[k]);
      }
    }
  });
}

}  // namespace tensord
