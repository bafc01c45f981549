// Linear-algebra ops: matmul, linalg.eigh, linalg.eigvalsh (PyTorch
// semantics). Kernels live in matmul_blas.cpp and eigh_lapack.cpp.
#include <cctype>
#include <string>

#include "ops/cpu/linalg_kernels.h"
#include "ops/cpu/register.h"
#include "ops/error.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

ParamSpec tensor_param(const char* name) {
  return ParamSpec{name, ParamKind::kTensor, Attr(), false, false};
}

void check_matmul_dtypes(DType a, DType b) {
  if (a != b) {
    throw Error(ErrorCode::kDtypeMismatch, "matmul: expected both arguments to have the same dtype, but got " +
                                               std::string(dtype_name(a)) + " and " + std::string(dtype_name(b)));
  }
  if (!matmul_dtype_supported(a)) {
    throw Error(ErrorCode::kDtypeMismatch, "matmul: not implemented for dtype " + std::string(dtype_name(a)));
  }
}

void add_matmul(OpRegistry& r) {
  OpDef op;
  op.name = "matmul";
  op.doc = "Matrix product with torch.matmul's rules: dot, matrix-vector, and batched with broadcast batch dims.";
  op.params = {tensor_param("input"), tensor_param("other")};
  op.outputs = {"out"};
  op.dtypes = dtypes_join({dtypes_integral(), dtypes_floating(), dtypes_complex()});
  op.dtype_note = "integer operands of one dtype; an MX operand (either side) with float32 or MX -> float32";
  // An MX operand is dequantized a panel at a time (ops/cpu/matmul_mx.cpp).
  op.takes_mx = true;
  op.infer = [](const OpArgs<TensorMeta>& a) {
    const TensorMeta& x = a.tensor(0);
    const TensorMeta& y = a.tensor(1);
    MatmulPlan p = matmul_plan(x.shape, y.shape);
    if (matmul_takes_mx(x, y)) {
      check_matmul_mx_dtypes(x, y);
      return std::vector<TensorMeta>{{DType::kFloat32, p.out}};
    }
    check_matmul_dtypes(x.dtype, y.dtype);
    return std::vector<TensorMeta>{{x.dtype, p.out}};
  };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    if (matmul_takes_mx(a.tensor(0).meta(), a.tensor(1).meta())) {
      return std::vector<Tensor>{matmul_mx_cpu(ctx, a.tensor(0), a.tensor(1))};
    }
    check_matmul_dtypes(a.tensor(0).dtype(), a.tensor(1).dtype());
    return std::vector<Tensor>{matmul_cpu(ctx, a.tensor(0), a.tensor(1))};
  };
  r.add(std::move(op));
}

// UPLO "L" or "U" (either case, as PyTorch).
char uplo_of(const Attr& a, const std::string& op) {
  const std::string& s = a.to_string((op + ": UPLO").c_str());
  const char c = s.size() == 1 ? static_cast<char>(std::toupper(static_cast<unsigned char>(s[0]))) : '?';
  if (c != 'L' && c != 'U') {
    throw Error(ErrorCode::kInvalidArgument, op + ": UPLO must be 'L' or 'U', got '" + s + "'");
  }
  return c;
}

// Eigenvalue and eigenvector metas of a (..., n, n) Hermitian input.
std::vector<TensorMeta> eigh_metas(const TensorMeta& a, const std::string& op) {
  if (a.shape.size() < 2) {
    throw Error(ErrorCode::kShapeMismatch,
                op + ": A must have at least 2 dimensions, but got shape " + shape_str(a.shape));
  }
  const int64_t rows = a.shape[a.shape.size() - 2], cols = a.shape.back();
  if (rows != cols) {
    throw Error(ErrorCode::kShapeMismatch, op + ": A must be batches of square matrices, but they are " +
                                               std::to_string(rows) + " by " + std::to_string(cols) + " matrices");
  }
  const DType t = a.dtype;
  if (t != DType::kFloat32 && t != DType::kFloat64 && t != DType::kComplex64 && t != DType::kComplex128) {
    throw Error(ErrorCode::kDtypeMismatch,
                op + ": expected a float32, float64, complex64 or complex128 input, got " + std::string(dtype_name(t)));
  }
  Shape w(a.shape.begin(), a.shape.end() - 1);
  return {TensorMeta{to_real(t), w}, TensorMeta{t, a.shape}};
}

void add_eigh(OpRegistry& r, bool vectors) {
  const std::string name = vectors ? "linalg.eigh" : "linalg.eigvalsh";
  OpDef op;
  op.name = name;
  op.doc = vectors ? "Eigenvalues (ascending) and orthonormal eigenvectors (as columns) of Hermitian matrices, "
                     "reading only the UPLO triangle."
                   : "Eigenvalues (ascending) of Hermitian matrices, reading only the UPLO triangle.";
  op.params = {tensor_param("A"), ParamSpec{"UPLO", ParamKind::kString, Attr("L"), false, false}};
  op.outputs =
      vectors ? std::vector<std::string>{"eigenvalues", "eigenvectors"} : std::vector<std::string>{"eigenvalues"};
  op.dtypes = {DType::kFloat32, DType::kFloat64, DType::kComplex64, DType::kComplex128};
  op.dtype_note = "eigenvalues real";
  op.infer = [name, vectors](const OpArgs<TensorMeta>& a) {
    uplo_of(a.attr(1), name);
    auto metas = eigh_metas(a.tensor(0), name);
    if (!vectors) metas.pop_back();
    return metas;
  };
  op.kernels["cpu"] = [name, vectors](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const char uplo = uplo_of(a.attr(1), name);
    const Tensor& x = a.tensor(0);
    auto metas = eigh_metas(x.meta(), name);
    Tensor w = ctx.empty(metas[0].dtype, metas[0].shape);
    if (!vectors) {
      eigh_cpu(ctx, x, uplo, w, nullptr, name.c_str());
      return std::vector<Tensor>{w};
    }
    Tensor v = ctx.empty(metas[1].dtype, metas[1].shape);
    eigh_cpu(ctx, x, uplo, w, &v, name.c_str());
    return std::vector<Tensor>{w, v};
  };
  r.add(std::move(op));
}

}  // namespace

void register_linalg_ops(OpRegistry& r) {
  set_blas_single_threaded();
  add_matmul(r);
  add_eigh(r, true);
  add_eigh(r, false);
}

}  // namespace tensord
