// Test helper for the elementwise and reduction op tests: builds host
// tensors, binds args to an op's params the way the program binder does
// (numbers for Scalar|Tensor params become wrapped 0-d tensors, omitted
// params take their defaults), runs infer then the cpu kernel, and checks
// the kernel's outputs against the inferred metas.
#pragma once

#include <gtest/gtest.h>

#include <complex>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/attr.h"
#include "ops/convert.h"
#include "ops/cpu/thread_pool.h"
#include "ops/error.h"
#include "ops/op_registry.h"
#include "ops/tensor.h"

namespace tensord::test_ew {

inline Tensor make(DType dt, Shape shape, const std::vector<double>& v) {
  Tensor t = Tensor::empty_host(dt, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(v.size()), t.numel());
  for (int64_t i = 0; i < t.numel() && i < static_cast<int64_t>(v.size()); ++i) {
    store_from_double(dt, t.data(), i, v[static_cast<size_t>(i)]);
  }
  return t;
}

inline Tensor make_c(DType dt, Shape shape, const std::vector<std::complex<double>>& v) {
  Tensor t = Tensor::empty_host(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) store_from_complex(dt, t.data(), i, v[static_cast<size_t>(i)]);
  return t;
}

// 0-d tensor (not a wrapped number).
inline Tensor scalar(DType dt, double v) {
  return make(dt, {}, {v});
}

inline std::vector<double> values(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = load_as_double(t.dtype(), t.data(), i);
  return out;
}

inline std::vector<std::complex<double>> cvalues(const Tensor& t) {
  std::vector<std::complex<double>> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = load_as_complex(t.dtype(), t.data(), i);
  return out;
}

// An argument: a tensor, an attr value, or None.
struct Arg {
  std::optional<Tensor> tensor;
  Attr attr;
  Arg() = default;                                     // None
  Arg(Tensor t) : tensor(std::move(t)) {}              // NOLINT(google-explicit-constructor)
  Arg(int v) : attr(v) {}                              // NOLINT(google-explicit-constructor)
  Arg(int64_t v) : attr(v) {}                          // NOLINT(google-explicit-constructor)
  Arg(double v) : attr(v) {}                           // NOLINT(google-explicit-constructor)
  Arg(bool v) : attr(v) {}                             // NOLINT(google-explicit-constructor)
  Arg(const char* v) : attr(v) {}                      // NOLINT(google-explicit-constructor)
  Arg(std::vector<int64_t> v) : attr(std::move(v)) {}  // NOLINT(google-explicit-constructor)
};
inline const Arg kNone{};

using Kwargs = std::vector<std::pair<std::string, Arg>>;

// A JSON number bound to a Scalar|Tensor param.
inline Tensor wrap_number(const Attr& a) {
  Tensor t;
  if (a.is_bool()) {
    t = Tensor::empty_host(DType::kBool, {});
    *t.data_ptr<bool>() = a.to_bool("x");
  } else if (a.is_int()) {
    t = Tensor::empty_host(DType::kInt64, {});
    *t.data_ptr<int64_t>() = a.to_int("x");
  } else {
    t = Tensor::empty_host(DType::kFloat64, {});
    *t.data_ptr<double>() = a.to_double("x");
  }
  t.set_wrapped_number(true);
  return t;
}

inline const OpDef& op_def(const std::string& name) {
  const OpDef* op = OpRegistry::global().find(name);
  if (!op) throw Error(ErrorCode::kUnknownOp, "no op " + name);
  return *op;
}

inline OpArgs<Tensor> bind(const OpDef& op, const std::vector<Arg>& pos, const Kwargs& kw) {
  OpArgs<Tensor> a;
  a.op = &op;
  a.node = "test";
  a.tensors.resize(op.params.size());
  a.attrs.resize(op.params.size());
  EXPECT_LE(pos.size(), op.params.size()) << op.name;
  for (size_t i = 0; i < op.params.size(); ++i) {
    const ParamSpec& p = op.params[i];
    const Arg* given = nullptr;
    if (i < pos.size()) given = &pos[i];
    for (const auto& [k, v] : kw) {
      if (k == p.name) given = &v;
    }
    const bool tensor_kind = p.kind == ParamKind::kTensor || p.kind == ParamKind::kScalarOrTensor;
    if (given && given->tensor) {
      a.tensors[i] = {*given->tensor};
    } else if (given && !given->attr.is_none()) {
      if (tensor_kind) {
        a.tensors[i] = {wrap_number(given->attr)};
      } else {
        a.attrs[i] = given->attr;
      }
    } else if (!given) {
      a.attrs[i] = p.default_value;
    }
  }
  return a;
}

inline OpArgs<TensorMeta> metas_of(const OpArgs<Tensor>& a) {
  OpArgs<TensorMeta> m;
  m.op = a.op;
  m.node = a.node;
  m.attrs = a.attrs;
  m.tensors.resize(a.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    for (const auto& t : a.tensors[i]) m.tensors[i].push_back(t.meta());
  }
  return m;
}

inline std::vector<TensorMeta> infer(const std::string& name, const std::vector<Arg>& pos, const Kwargs& kw = {}) {
  const OpDef& op = op_def(name);
  return op.infer(metas_of(bind(op, pos, kw)));
}

// Runs infer then the cpu kernel (inline, or on `pool`), checks that the
// outputs match the inferred metas, and returns them.
inline std::vector<Tensor> call(const std::string& name, const std::vector<Arg>& pos, const Kwargs& kw = {},
                                ThreadPool* pool = nullptr) {
  const OpDef& op = op_def(name);
  OpArgs<Tensor> args = bind(op, pos, kw);
  std::vector<TensorMeta> inferred = op.infer(metas_of(args));
  OpContext ctx;
  ctx.pool = pool;
  std::vector<Tensor> out = op.kernels.at("cpu")(ctx, args);
  EXPECT_EQ(out.size(), inferred.size()) << name;
  for (size_t i = 0; i < out.size() && i < inferred.size(); ++i) {
    EXPECT_EQ(out[i].dtype(), inferred[i].dtype) << name << " output " << i;
    EXPECT_EQ(out[i].shape(), inferred[i].shape) << name << " output " << i;
  }
  return out;
}

inline Tensor call1(const std::string& name, const std::vector<Arg>& pos, const Kwargs& kw = {},
                    ThreadPool* pool = nullptr) {
  auto out = call(name, pos, kw, pool);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

// The error code infer throws (the kernel is never reached for bad input),
// or kInternal when nothing is thrown.
inline ErrorCode infer_error(const std::string& name, const std::vector<Arg>& pos, const Kwargs& kw = {},
                             std::string* message = nullptr) {
  try {
    infer(name, pos, kw);
  } catch (const Error& e) {
    if (message) *message = e.message();
    return e.code();
  }
  return ErrorCode::kInternal;
}

// The error code running the op (infer + kernel) throws, or kInternal.
inline ErrorCode call_error(const std::string& name, const std::vector<Arg>& pos, const Kwargs& kw = {},
                            std::string* message = nullptr) {
  try {
    call(name, pos, kw);
  } catch (const Error& e) {
    if (message) *message = e.message();
    return e.code();
  }
  return ErrorCode::kInternal;
}

}  // namespace tensord::test_ew
