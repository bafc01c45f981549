// Shape ops: reshape permute transpose cat stack getitem (PyTorch semantics).
// reshape is a zero-copy view (tensors are contiguous, so it always can be);
// the others copy into a fresh contiguous output, so no value but a reshape
// ever aliases another (in-place ops and the commit protocol rely on that).
#include <algorithm>
#include <cstring>
#include <string>

#include "ops/convert.h"
#include "ops/cpu/getitem_index.h"
#include "ops/cpu/register.h"
#include "ops/cpu/strided_copy.h"
#include "ops/error.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

[[noreturn]] void fail(ErrorCode code, const std::string& msg) {
  throw Error(code, msg);
}

ParamSpec tensor_param(const char* name) {
  return ParamSpec{name, ParamKind::kTensor, Attr(), false, false};
}
ParamSpec attr_param(const char* name, ParamKind kind, Attr def = Attr()) {
  return ParamSpec{name, kind, std::move(def), false, false};
}

// ---- reshape ----

Shape reshape_shape(const Shape& in, const std::vector<int64_t>& spec) {
  const int64_t numel = shape_numel(in);
  int64_t infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    if (spec[i] == -1) {
      if (infer_at >= 0) fail(ErrorCode::kInvalidArgument, "reshape: only one dimension can be inferred");
      infer_at = static_cast<int64_t>(i);
    } else if (spec[i] < 0) {
      fail(ErrorCode::kInvalidArgument, "reshape: invalid shape dimension " + std::to_string(spec[i]));
    } else {
      known = spec[i] == 0 || known == 0 ? 0 : (known > kMaxNumel / spec[i] ? kMaxNumel + 1 : known * spec[i]);
    }
  }
  Shape out(spec.begin(), spec.end());
  if (infer_at >= 0) {
    if (known == 0) {
      fail(ErrorCode::kShapeMismatch, "reshape: cannot reshape tensor of 0 elements into shape " + shape_str(spec) +
                                          " because the unspecified dimension size -1 can be any value");
    }
    if (numel % known != 0) {
      fail(ErrorCode::kShapeMismatch,
           "reshape: shape " + shape_str(spec) + " is invalid for input of size " + std::to_string(numel));
    }
    out[static_cast<size_t>(infer_at)] = numel / known;
  } else if (known != numel) {
    fail(ErrorCode::kShapeMismatch,
         "reshape: shape " + shape_str(spec) + " is invalid for input of size " + std::to_string(numel));
  }
  shape_numel(out);  // rank limit
  return out;
}

// ---- permute / transpose ----

std::vector<int64_t> permute_dims(const Shape& in, const std::vector<int64_t>& dims, const char* op) {
  const auto rank = static_cast<int64_t>(in.size());
  if (static_cast<int64_t>(dims.size()) != rank) {
    fail(ErrorCode::kInvalidArgument, std::string(op) + ": number of dims don't match: the input has rank " +
                                          std::to_string(rank) + " but dims is " + shape_str(dims));
  }
  std::vector<int64_t> out(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], rank, op);
    if (rank == 0 || seen[static_cast<size_t>(d)]) {
      fail(ErrorCode::kInvalidArgument, std::string(op) + ": repeated dim in " + shape_str(dims));
    }
    seen[static_cast<size_t>(d)] = true;
    out[i] = d;
  }
  return out;
}

Tensor permute_copy(const OpContext& ctx, const Tensor& x, const std::vector<int64_t>& perm) {
  const std::vector<int64_t> st = contiguous_strides(x.shape());
  Shape shape(perm.size());
  std::vector<int64_t> strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    shape[i] = x.shape()[static_cast<size_t>(perm[i])];
    strides[i] = st[static_cast<size_t>(perm[i])];
  }
  Tensor out = ctx.empty(x.dtype(), shape);
  strided_copy(ctx, x.data(), dtype_size(x.dtype()), shape, strides, out.data());
  return out;
}

std::vector<int64_t> transpose_perm(int64_t rank, int64_t d0, int64_t d1) {
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = i;
  if (rank > 0) std::swap(perm[static_cast<size_t>(d0)], perm[static_cast<size_t>(d1)]);
  return perm;
}

// ---- cat / stack ----

// torch.cat accepts legacy 1-D empty tensors of any dtype next to tensors of
// any rank and skips them.
bool cat_skipped(const TensorMeta& m) {
  return m.shape.size() == 1 && m.shape[0] == 0;
}

struct CatPlan {
  DType dtype;
  Shape out;
  int64_t dim = 0;
};

// `shapes` are the inputs' shapes as cat sees them (stack passes them
// unsqueezed).
CatPlan cat_plan(const std::vector<TensorMeta>& in, const std::vector<Shape>& shapes, int64_t dim, const char* op) {
  if (in.empty()) fail(ErrorCode::kInvalidArgument, std::string(op) + ": expected a non-empty list of tensors");
  CatPlan p;
  p.dtype = in[0].dtype;
  for (const auto& m : in) p.dtype = promote_types(p.dtype, m.dtype);
  const Shape* ref = nullptr;
  size_t ref_i = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (shapes[i].empty()) {
      fail(ErrorCode::kInvalidArgument, std::string(op) + ": zero-dimensional tensor (at position " +
                                            std::to_string(i) + ") cannot be concatenated");
    }
    if (!ref && !(cat_skipped(in[i]) && shapes[i].size() == 1)) {
      ref = &shapes[i];
      ref_i = i;
    }
  }
  if (!ref) {  // all legacy empties
    p.dim = wrap_dim(dim, 1, op);
    p.out = Shape{0};
    return p;
  }
  const auto rank = static_cast<int64_t>(ref->size());
  p.dim = wrap_dim(dim, rank, op);
  p.out = *ref;
  p.out[static_cast<size_t>(p.dim)] = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    if (cat_skipped(in[i]) && s.size() == 1 && ref->size() != 1) continue;
    bool ok = s.size() == ref->size();
    for (size_t d = 0; ok && d < s.size(); ++d) {
      if (static_cast<int64_t>(d) != p.dim && s[d] != (*ref)[d]) ok = false;
    }
    if (!ok) {
      fail(ErrorCode::kShapeMismatch, std::string(op) + ": sizes of tensors must match except in dimension " +
                                          std::to_string(p.dim) + ", but got " + shape_str(*ref) + " at position " +
                                          std::to_string(ref_i) + " and " + shape_str(s) + " at position " +
                                          std::to_string(i));
    }
    p.out[static_cast<size_t>(p.dim)] += s[static_cast<size_t>(p.dim)];
  }
  shape_numel(p.out);
  return p;
}

std::vector<Shape> meta_shapes(const std::vector<TensorMeta>& in) {
  std::vector<Shape> s;
  s.reserve(in.size());
  for (const auto& m : in) s.push_back(m.shape);
  return s;
}

std::vector<Shape> stack_shapes(const std::vector<TensorMeta>& in, int64_t dim) {
  if (in.empty()) fail(ErrorCode::kInvalidArgument, "stack: expected a non-empty list of tensors");
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].shape != in[0].shape) {
      fail(ErrorCode::kShapeMismatch, "stack: expects each tensor to be equal size, but got " + shape_str(in[0].shape) +
                                          " at entry 0 and " + shape_str(in[i].shape) + " at entry " +
                                          std::to_string(i));
    }
  }
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(in[0].shape.size()) + 1, "stack");
  std::vector<Shape> s;
  s.reserve(in.size());
  for (const auto& m : in) {
    Shape u = m.shape;
    u.insert(u.begin() + d, 1);
    s.push_back(std::move(u));
  }
  return s;
}

std::vector<TensorMeta> metas_of(const std::vector<Tensor>& ts) {
  std::vector<TensorMeta> m;
  m.reserve(ts.size());
  for (const auto& t : ts) m.push_back(t.meta());
  return m;
}

Tensor cat_run(const OpContext& ctx, const std::vector<Tensor>& in, const std::vector<Shape>& shapes,
               const CatPlan& p) {
  Tensor out = ctx.empty(p.dtype, p.out);
  if (out.numel() == 0) return out;
  const size_t esz = dtype_size(p.dtype);
  const auto dim = static_cast<size_t>(p.dim);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < dim; ++d) outer *= p.out[d];
  for (size_t d = dim + 1; d < p.out.size(); ++d) inner *= p.out[d];
  const int64_t out_row = p.out[dim] * inner;  // elements per outer index in the output
  // Per input: elements per outer index and its column offset in the output row.
  std::vector<int64_t> chunk(in.size(), 0), col(in.size(), 0);
  int64_t c = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].numel() == 0) continue;  // also the skipped legacy empties
    chunk[i] = shapes[i][dim] * inner;
    col[i] = c;
    c += chunk[i];
  }
  const auto n_in = static_cast<int64_t>(in.size());
  const int64_t avg = std::max<int64_t>(1, out_row / n_in);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / (avg * static_cast<int64_t>(esz)));
  char* dst = static_cast<char*>(out.data());
  ctx.parallel_for(outer * n_in, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / n_in;
      const auto i = static_cast<size_t>(t % n_in);
      if (chunk[i] == 0) continue;
      char* d = dst + (o * out_row + col[i]) * static_cast<int64_t>(esz);
      const size_t src_esz = dtype_size(in[i].dtype());
      const char* s = static_cast<const char*>(in[i].data()) + o * chunk[i] * static_cast<int64_t>(src_esz);
      if (in[i].dtype() == p.dtype) {
        std::memcpy(d, s, static_cast<size_t>(chunk[i]) * esz);
      } else {
        convert_elements(s, in[i].dtype(), d, p.dtype, chunk[i]);
      }
    }
  });
  return out;
}

// ---- registration ----

void add_reshape(OpRegistry& r) {
  OpDef op;
  op.name = "reshape";
  op.doc = "Returns the input with a new shape of the same number of elements (one dim may be -1); a view, no copy.";
  op.params = {tensor_param("input"), attr_param("shape", ParamKind::kIntList)};
  op.outputs = {"out"};
  op.dtypes = dtypes_all();
  op.infer = [](const OpArgs<TensorMeta>& a) {
    const TensorMeta& x = a.tensor(0);
    return std::vector<TensorMeta>{{x.dtype, reshape_shape(x.shape, a.attr(1).to_int_list("reshape: shape"))}};
  };
  op.kernels["cpu"] = [](const OpContext&, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    return std::vector<Tensor>{x.view(reshape_shape(x.shape(), a.attr(1).to_int_list("reshape: shape")))};
  };
  r.add(std::move(op));
}

void add_permute(OpRegistry& r) {
  OpDef op;
  op.name = "permute";
  op.doc = "Returns the input with its dims reordered: output dim i is input dim dims[i].";
  op.params = {tensor_param("input"), attr_param("dims", ParamKind::kIntList)};
  op.outputs = {"out"};
  op.dtypes = dtypes_all();
  op.infer = [](const OpArgs<TensorMeta>& a) {
    const TensorMeta& x = a.tensor(0);
    auto perm = permute_dims(x.shape, a.attr(1).to_int_list("permute: dims"), "permute");
    Shape s;
    for (int64_t p : perm) s.push_back(x.shape[static_cast<size_t>(p)]);
    return std::vector<TensorMeta>{{x.dtype, s}};
  };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    auto perm = permute_dims(x.shape(), a.attr(1).to_int_list("permute: dims"), "permute");
    return std::vector<Tensor>{permute_copy(ctx, x, perm)};
  };
  r.add(std::move(op));
}

void add_transpose(OpRegistry& r) {
  OpDef op;
  op.name = "transpose";
  op.doc = "Returns the input with dims dim0 and dim1 swapped.";
  op.params = {tensor_param("input"), attr_param("dim0", ParamKind::kInt), attr_param("dim1", ParamKind::kInt)};
  op.outputs = {"out"};
  op.dtypes = dtypes_all();
  auto perm_of = [](const Shape& s, const std::vector<Attr>& attrs) {
    const auto rank = static_cast<int64_t>(s.size());
    int64_t d0 = wrap_dim(attrs[1].to_int("transpose: dim0"), rank, "transpose");
    int64_t d1 = wrap_dim(attrs[2].to_int("transpose: dim1"), rank, "transpose");
    return transpose_perm(rank, d0, d1);
  };
  op.infer = [perm_of](const OpArgs<TensorMeta>& a) {
    const TensorMeta& x = a.tensor(0);
    Shape s;
    for (int64_t p : perm_of(x.shape, a.attrs)) s.push_back(x.shape[static_cast<size_t>(p)]);
    return std::vector<TensorMeta>{{x.dtype, s}};
  };
  op.kernels["cpu"] = [perm_of](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    return std::vector<Tensor>{permute_copy(ctx, x, perm_of(x.shape(), a.attrs))};
  };
  r.add(std::move(op));
}

void add_cat(OpRegistry& r) {
  OpDef op;
  op.name = "cat";
  op.doc = "Concatenates tensors along an existing dim; dtypes promote as in torch.cat.";
  op.params = {ParamSpec{"tensors", ParamKind::kTensorList, Attr(), false, false},
               attr_param("dim", ParamKind::kInt, Attr(0))};
  op.outputs = {"out"};
  op.dtypes = dtypes_all();
  op.dtype_note = "promoted";
  op.infer = [](const OpArgs<TensorMeta>& a) {
    const auto& in = a.list(0);
    CatPlan p = cat_plan(in, meta_shapes(in), a.attr(1).to_int("cat: dim"), "cat");
    return std::vector<TensorMeta>{{p.dtype, p.out}};
  };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const auto metas = metas_of(a.list(0));
    const auto shapes = meta_shapes(metas);
    CatPlan p = cat_plan(metas, shapes, a.attr(1).to_int("cat: dim"), "cat");
    return std::vector<Tensor>{cat_run(ctx, a.list(0), shapes, p)};
  };
  r.add(std::move(op));
}

void add_stack(OpRegistry& r) {
  OpDef op;
  op.name = "stack";
  op.doc = "Stacks equal-shaped tensors along a new dim; dtypes promote as in torch.stack.";
  op.params = {ParamSpec{"tensors", ParamKind::kTensorList, Attr(), false, false},
               attr_param("dim", ParamKind::kInt, Attr(0))};
  op.outputs = {"out"};
  op.dtypes = dtypes_all();
  op.dtype_note = "promoted";
  op.infer = [](const OpArgs<TensorMeta>& a) {
    const auto& in = a.list(0);
    const int64_t dim = a.attr(1).to_int("stack: dim");
    CatPlan p = cat_plan(in, stack_shapes(in, dim), dim, "stack");
    return std::vector<TensorMeta>{{p.dtype, p.out}};
  };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const auto metas = metas_of(a.list(0));
    const int64_t dim = a.attr(1).to_int("stack: dim");
    const auto shapes = stack_shapes(metas, dim);
    CatPlan p = cat_plan(metas, shapes, dim, "stack");
    return std::vector<Tensor>{cat_run(ctx, a.list(0), shapes, p)};
  };
  r.add(std::move(op));
}

void add_getitem(OpRegistry& r) {
  OpDef op;
  op.name = "getitem";
  op.doc =
      "Basic slicing x[index]; index is numpy subscript text such as \"0, 1:3, ..., ::2, None\" "
      "(ints select, start:stop:step slices with step > 0, ... and None), or an int / int list.";
  op.params = {tensor_param("input"), attr_param("index", ParamKind::kString)};
  op.outputs = {"out"};
  op.dtypes = dtypes_all();
  op.infer = [](const OpArgs<TensorMeta>& a) {
    const TensorMeta& x = a.tensor(0);
    IndexedView v = apply_index(index_from_attr(a.attr(1)), x.shape);
    return std::vector<TensorMeta>{{x.dtype, v.shape}};
  };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    const Tensor& x = a.tensor(0);
    IndexedView v = apply_index(index_from_attr(a.attr(1)), x.shape());
    Tensor out = ctx.empty(x.dtype(), v.shape);
    const size_t esz = dtype_size(x.dtype());
    if (out.numel() > 0) {
      const char* base = static_cast<const char*>(x.data()) + v.offset * static_cast<int64_t>(esz);
      strided_copy(ctx, base, esz, v.shape, v.strides, out.data());
    }
    return std::vector<Tensor>{out};
  };
  r.add(std::move(op));
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  add_reshape(r);
  add_permute(r);
  add_transpose(r);
  add_cat(r);
  add_stack(r);
  add_getitem(r);
}

}  // namespace tensord
