// Test helpers for the shape, creation and linalg op tests: build tensors,
// call an op from the global registry (shape inference, then the CPU kernel)
// and read results back.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ops/cpu/thread_pool.h"
#include "ops/error.h"
#include "ops/op_registry.h"
#include "ops/tensor.h"

namespace tensord::shape_test {

// One argument: a tensor, a tensor list or an attr.
using Arg = std::variant<Tensor, std::vector<Tensor>, Attr>;

template <class T>
Tensor make(DType dtype, Shape shape, const std::vector<T>& values) {
  Tensor t = Tensor::empty_host(dtype, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  EXPECT_EQ(dtype_size(dtype), sizeof(T));
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * sizeof(T));
  return t;
}

inline Tensor f32(Shape shape, const std::vector<float>& v) {
  return make<float>(DType::kFloat32, std::move(shape), v);
}
inline Tensor i64(Shape shape, const std::vector<int64_t>& v) {
  return make<int64_t>(DType::kInt64, std::move(shape), v);
}

// 0, 1, 2, ... as float32 of `shape`.
inline Tensor iota_f32(Shape shape) {
  Tensor t = Tensor::empty_host(DType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data_ptr<float>()[i] = static_cast<float>(i);
  return t;
}

// The elements as T; a T narrower than the element reads its parts (a
// complex64 tensor as float gives re, im, re, im, ...).
template <class T>
std::vector<T> values(const Tensor& t) {
  EXPECT_EQ(dtype_size(t.dtype()) % sizeof(T), 0u);
  std::vector<T> v(t.nbytes() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), t.data(), v.size() * sizeof(T));
  return v;
}

struct OpCall {
  std::vector<TensorMeta> metas;  // from infer
  std::vector<Tensor> outs;       // from the kernel
};

// Binds positional args then kwargs (by name) to the op's params, fills
// defaults, runs infer and the "cpu" kernel (on `pool` when given) and checks
// that the outputs match the inferred metas. Errors propagate as Error.
inline OpCall call_op(const std::string& name, const std::vector<Arg>& args,
                      const std::vector<std::pair<std::string, Arg>>& kwargs = {}, ThreadPool* pool = nullptr,
                      const std::atomic<bool>* cancelled = nullptr) {
  const OpDef* op = OpRegistry::global().find(name);
  if (!op) throw std::runtime_error("no op " + name);
  const size_t np = op->params.size();
  std::vector<const Arg*> bound(np, nullptr);
  if (args.size() > np) throw std::runtime_error("too many args for " + name);
  for (size_t i = 0; i < args.size(); ++i) bound[i] = &args[i];
  for (const auto& [k, v] : kwargs) {
    int idx = op->param_index(k);
    if (idx < 0) throw std::runtime_error("no param " + k + " in " + name);
    bound[static_cast<size_t>(idx)] = &v;
  }
  OpArgs<TensorMeta> margs;
  OpArgs<Tensor> targs;
  margs.op = targs.op = op;
  margs.node = targs.node = "test";
  margs.tensors.resize(np);
  targs.tensors.resize(np);
  margs.attrs.resize(np);
  targs.attrs.resize(np);
  for (size_t i = 0; i < np; ++i) {
    const Arg* a = bound[i];
    if (!a) {
      targs.attrs[i] = margs.attrs[i] = op->params[i].default_value;
      continue;
    }
    if (const auto* t = std::get_if<Tensor>(a)) {
      targs.tensors[i] = {*t};
      margs.tensors[i] = {t->meta()};
    } else if (const auto* l = std::get_if<std::vector<Tensor>>(a)) {
      targs.tensors[i] = *l;
      for (const auto& t : *l) margs.tensors[i].push_back(t.meta());
    } else {
      targs.attrs[i] = margs.attrs[i] = std::get<Attr>(*a);
    }
  }
  OpCall c;
  c.metas = op->infer(margs);
  OpContext ctx;
  ctx.pool = pool;
  ctx.cancelled = cancelled;
  c.outs = op->kernels.at("cpu")(ctx, targs);
  EXPECT_EQ(c.outs.size(), c.metas.size()) << name;
  for (size_t i = 0; i < c.outs.size() && i < c.metas.size(); ++i) {
    EXPECT_EQ(c.outs[i].dtype(), c.metas[i].dtype) << name << " output " << i;
    EXPECT_EQ(c.outs[i].shape(), c.metas[i].shape) << name << " output " << i;
  }
  return c;
}

// The single output of an op.
inline Tensor run1(const std::string& name, const std::vector<Arg>& args,
                   const std::vector<std::pair<std::string, Arg>>& kwargs = {}, ThreadPool* pool = nullptr) {
  OpCall c = call_op(name, args, kwargs, pool);
  EXPECT_EQ(c.outs.size(), 1u);
  return c.outs.at(0);
}

// The error code an op call throws (from infer or the kernel); fails the
// test if it does not throw.
inline ErrorCode error_of(const std::string& name, const std::vector<Arg>& args,
                          const std::vector<std::pair<std::string, Arg>>& kwargs = {}) {
  try {
    call_op(name, args, kwargs);
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << name << " did not throw";
  return ErrorCode::kInternal;
}

// The error code the shape inference alone throws (kInternal if none).
inline ErrorCode infer_error_of(const std::string& name, const std::vector<TensorMeta>& tensors,
                                const std::vector<Attr>& attrs_by_param) {
  const OpDef* op = OpRegistry::global().find(name);
  OpArgs<TensorMeta> a;
  a.op = op;
  a.tensors.resize(op->params.size());
  a.attrs.resize(op->params.size());
  size_t ti = 0;
  for (size_t i = 0; i < op->params.size(); ++i) {
    if (op->params[i].kind == ParamKind::kTensor && ti < tensors.size()) a.tensors[i] = {tensors[ti++]};
    a.attrs[i] =
        i < attrs_by_param.size() && !attrs_by_param[i].is_none() ? attrs_by_param[i] : op->params[i].default_value;
  }
  try {
    op->infer(a);
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kInternal;
}

}  // namespace tensord::shape_test
