// matmul with an MX operand (API.md 7; docs/api-notes.md "MX"): the MX side
// is dequantized a panel at a time into a small float32 buffer (per thread)
// and each panel goes through one OpenBLAS sgemm, so no float32 copy of the
// whole operand is made (a panel: about 1 MiB, at least 64 rows / columns
// of k; freed when the kernel returns). An MX left operand is read in row panels (rows of
// A are contiguous runs of its logical elements), an MX right operand in
// column panels (each of its k rows contributes a run of the panel's
// columns); every output element is still one full-k dot product, as in
// dequantize-then-matmul. Works for any block axis: mx_dequantize_range
// follows the layout. Both operands MX: per column panel of B, A's row
// panels are dequantized again (A is read n / panel_cols times).
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <string>

#include "ops/cpu/linalg_kernels.h"
#include "ops/cpu/mx_loop.h"
#include "ops/error.h"
#include "ops/mx_tensor.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

// Floats per dequantized panel (1 MiB); a panel holds at least kMinPanel
// rows or columns (or all of them) whatever k is.
constexpr int64_t kPanelFloats = int64_t{1} << 18;
constexpr int64_t kMinPanel = 64;

// One operand: a float32 matrix batch or an MX tensor, seen as matrices of
// rows x cols (a 1-D operand is one row or one column).
struct Operand {
  const float* f32 = nullptr;
  const uint8_t* q = nullptr;
  const uint8_t* sc = nullptr;
  kernels::MxFormat format{};
  MxLayout layout;
  int64_t rows = 0, cols = 0;

  bool mx() const { return q != nullptr; }
  int64_t matrix_offset(int64_t mi) const { return mi * rows * cols; }
  // Rows [r0, r1) of matrix mi (contiguous logical elements) into buf.
  void dequantize_rows(int64_t mi, int64_t r0, int64_t r1, float* buf) const {
    mx_dequantize_range(q, sc, format, layout, matrix_offset(mi) + r0 * cols, (r1 - r0) * cols, buf);
  }
  // Columns [c0, c1) of matrix mi into buf (row-major, c1 - c0 wide).
  void dequantize_cols(int64_t mi, int64_t c0, int64_t c1, float* buf) const {
    if (c0 == 0 && c1 == cols) return dequantize_rows(mi, 0, rows, buf);  // whole rows: one run
    for (int64_t r = 0; r < rows; ++r) {
      mx_dequantize_range(q, sc, format, layout, matrix_offset(mi) + r * cols + c0, c1 - c0, buf + r * (c1 - c0));
    }
  }
};

Operand operand_of(const Tensor& t, int64_t rows, int64_t cols) {
  Operand o;
  o.rows = rows;
  o.cols = cols;
  if (!t.is_mx()) {
    o.f32 = t.data_ptr<float>();
    return o;
  }
  const MxMeta& m = *t.meta().mx;
  o.format = m.format;
  o.layout = mx_layout_of(m);
  const Tensor el = mx_elements(t);
  const Tensor sc = mx_scale(t);
  o.q = static_cast<const uint8_t*>(el.data());
  o.sc = static_cast<const uint8_t*>(sc.data());
  return o;
}

// The index of the operand's own matrix for broadcast batch item bi.
int64_t own_matrix(int64_t bi, const Shape& batch, const Shape& own) {
  int64_t idx = 0, stride = 1;
  for (size_t j = own.size(); j-- > 0;) {
    const size_t d = batch.size() - own.size() + j;
    int64_t rest = bi;
    for (size_t e = batch.size(); e-- > d + 1;) rest /= batch[e];
    const int64_t i = rest % batch[d];
    if (own[j] != 1) idx += i * stride;
    stride *= own[j];
  }
  return idx;
}

// An uninitialised float buffer grown to at least n floats.
float* grow(std::unique_ptr<float[]>& buf, int64_t& cap, int64_t n) {
  if (n > cap) {
    buf = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(n));
    cap = n;
  }
  return buf.get();
}

void sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
           int64_t ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f, c, static_cast<int>(ldc));
}

}  // namespace

bool matmul_takes_mx(const TensorMeta& a, const TensorMeta& b) {
  return a.mx != nullptr || b.mx != nullptr;
}

void check_matmul_mx_dtypes(const TensorMeta& a, const TensorMeta& b) {
  for (const TensorMeta* t : {&a, &b}) {
    if (!t->mx && t->dtype != DType::kFloat32) {
      throw Error(ErrorCode::kDtypeMismatch,
                  "matmul: with an MX operand the other operand must be float32 or an MX tensor, got " + t->str() +
                      " (mx.dequantize(q) gives the float32 values; convert the other first)");
    }
  }
}

Tensor matmul_mx_cpu(const OpContext& ctx, const Tensor& a, const Tensor& b) {
  check_matmul_mx_dtypes(a.meta(), b.meta());
  const MatmulPlan p = matmul_plan(a.shape(), b.shape());
  Tensor out = ctx.empty(DType::kFloat32, p.out);
  if (out.numel() == 0) return out;
  if (p.k == 0) {
    std::memset(out.data(), 0, out.nbytes());
    return out;
  }
  if (p.m > INT_MAX || p.k > INT_MAX || p.n > INT_MAX) {
    throw Error(ErrorCode::kInvalidArgument, "matmul: a dimension over 2^31 - 1 is not supported");
  }
  const int64_t m = p.m, k = p.k, n = p.n;
  const Operand A = operand_of(a, m, k);
  const Operand B = operand_of(b, k, n);
  float* c = out.data_ptr<float>();
  const int64_t nb = shape_numel(p.batch);
  // Row panels of A (when MX), column panels of B (when MX).
  const int64_t rb = A.mx() ? std::clamp<int64_t>(kPanelFloats / k, std::min(kMinPanel, m), m) : m;
  const int64_t cb = B.mx() ? std::clamp<int64_t>(kPanelFloats / k, std::min(kMinPanel, n), n) : n;
  const int64_t row_panels = (m + rb - 1) / rb;
  const int64_t col_panels = (n + cb - 1) / cb;
  // Tasks: batch item x column panel x (A MX and B plain: row panel).
  const int64_t per_col = B.mx() ? 1 : row_panels;
  const int64_t tasks = nb * col_panels * per_col;
  ctx.parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
    std::unique_ptr<float[]> abuf, bbuf;  // this chunk's panels
    int64_t acap = 0, bcap = 0;
    for (int64_t t = t0; t < t1; ++t) {
      if (ctx.cancelled && ctx.cancelled->load(std::memory_order_relaxed)) {
        throw Error(ErrorCode::kCancelled, "matmul: cancelled");
      }
      const int64_t bi = t / (col_panels * per_col);
      const int64_t cp = (t / per_col) % col_panels;
      const int64_t ai = own_matrix(bi, p.batch, p.a_batch);
      const int64_t bj = own_matrix(bi, p.batch, p.b_batch);
      const int64_t c0 = cp * cb, c1 = std::min(n, c0 + cb);
      float* cmat = c + bi * m * n;
      // The right operand's panel: columns [c0, c1) of B, ldb.
      const float* bp = nullptr;
      int64_t ldb = n;
      if (B.mx()) {
        float* buf = grow(bbuf, bcap, k * (c1 - c0));
        B.dequantize_cols(bj, c0, c1, buf);
        bp = buf;
        ldb = c1 - c0;
      } else {
        bp = B.f32 + B.matrix_offset(bj) + c0;
      }
      const int64_t r_first = B.mx() ? 0 : t % per_col;
      const int64_t r_last = B.mx() ? row_panels : r_first + 1;
      for (int64_t rp = r_first; rp < r_last; ++rp) {
        const int64_t r0 = rp * rb, r1 = std::min(m, r0 + rb);
        const float* ap = nullptr;
        if (A.mx()) {
          float* buf = grow(abuf, acap, (r1 - r0) * k);
          A.dequantize_rows(ai, r0, r1, buf);
          ap = buf;
        } else {
          ap = A.f32 + A.matrix_offset(ai) + r0 * k;
        }
        sgemm(r1 - r0, c1 - c0, k, ap, k, bp, ldb, cmat + r0 * n + c0, n);
      }
    }
  });
  return out;
}

}  // namespace tensord
