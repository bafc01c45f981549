// Every registered op's dtype list (OpDef::dtypes, what GET /v1/ops
// publishes) is what its shape inference accepts: each listed dtype is
// accepted and each other one refused, with every tensor operand of that
// one dtype (a creation op: dtype= it; operands with a fixed dtype of their
// own keep it) and the other arguments the op needs.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ops/dtype_list.h"
#include "ops/error.h"
#include "ops/mx_tensor.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

TensorMeta meta(DType t, Shape shape = {2, 2}) {
  TensorMeta m;
  m.dtype = t;
  m.shape = std::move(shape);
  return m;
}

// Arguments beyond the tensor operands, by op.
const std::map<std::string, std::map<std::string, Attr>>& extra_attrs() {
  static const std::map<std::string, std::map<std::string, Attr>> m = {
      {"full", {{"size", std::vector<int64_t>{2, 2}}, {"fill_value", 1.0}}},
      {"zeros", {{"size", std::vector<int64_t>{2, 2}}}},
      {"ones", {{"size", std::vector<int64_t>{2, 2}}}},
      {"rand", {{"size", std::vector<int64_t>{2, 2}}}},
      {"randn", {{"size", std::vector<int64_t>{2, 2}}}},
      {"arange", {{"start", 0.0}, {"end", 4.0}}},
      {"getitem", {{"index", "0:1"}}},
      {"permute", {{"dims", std::vector<int64_t>{1, 0}}}},
      {"reshape", {{"shape", std::vector<int64_t>{4}}}},
      {"transpose", {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}}},
      {"to", {{"dtype", "float32"}}},
      {"mx.quantize", {{"format", "mxfp8_e4m3"}}},
  };
  return m;
}

// Operands whose dtype is fixed, whatever the op's list says: {dtype, shape}.
struct FixedOperand {
  DType dtype;
  Shape shape;
};
const std::map<std::string, std::map<std::string, FixedOperand>>& fixed_operands() {
  static const std::map<std::string, std::map<std::string, FixedOperand>> m = {
      {"where", {{"condition", {DType::kBool, {2, 2}}}}},
  };
  return m;
}

// MX ops block along the last axis: 32 elements.
Shape shape_for(const OpDef& op) {
  return op.name.rfind("mx.", 0) == 0 ? Shape{2, 32} : Shape{2, 2};
}

// The op's arguments with every tensor operand of dtype `t`.
OpArgs<TensorMeta> args_of(const OpDef& op, DType t) {
  OpArgs<TensorMeta> a;
  a.op = &op;
  a.node = "n";
  a.tensors.resize(op.params.size());
  a.attrs.resize(op.params.size());
  a.names.resize(op.params.size());
  const auto extra = extra_attrs().find(op.name);
  const auto fixed = fixed_operands().find(op.name);
  const Shape shape = shape_for(op);
  for (size_t i = 0; i < op.params.size(); ++i) {
    const ParamSpec& p = op.params[i];
    const bool required = p.default_value.is_none() && !p.optional;
    switch (p.kind) {
      case ParamKind::kTensor:
      case ParamKind::kScalarOrTensor:
        if (required || (op.name == "clamp" && p.name == "min")) a.tensors[i] = {meta(t, shape)};
        // An mx.* op that takes MX tensors lists uint8, their bytes' dtype:
        // its uint8 operand is an MX tensor. (matmul also takes MX operands,
        // but its uint8 is the integer product: tests/unit/ops/
        // mx_matmul_test.cpp covers its MX operands.)
        if (op.takes_mx && t == DType::kUInt8 && op.name.rfind("mx.", 0) == 0) {
          a.tensors[i] = {mx_tensor_meta(make_mx_meta(kernels::MxFormat::kFp8E4M3, 32, -1, shape, false, "t"))};
        }
        if (fixed != fixed_operands().end()) {
          auto f = fixed->second.find(p.name);
          if (f != fixed->second.end()) a.tensors[i] = {meta(f->second.dtype, f->second.shape)};
        }
        break;
      case ParamKind::kTensorList:
        a.tensors[i] = {meta(t), meta(t)};
        a.names[i] = {"$stored/w0", "$stored/w1"};  // optimizers update stored tensors
        break;
      case ParamKind::kDType:
        a.attrs[i] = Attr(std::string(dtype_name(t)));
        break;
      case ParamKind::kString:
        a.attrs[i] = p.name == "state" ? Attr("opt/state") : p.default_value;
        break;
      default:
        a.attrs[i] = p.default_value;
    }
    if (extra != extra_attrs().end()) {
      auto it = extra->second.find(p.name);
      if (it != extra->second.end()) a.attrs[i] = it->second;
    }
  }
  return a;
}

bool accepts(const OpDef& op, DType t, std::string* why) {
  try {
    op.infer(args_of(op, t));
    return true;
  } catch (const Error& e) {
    *why = e.message();
    return false;
  }
}

TEST(OpDtypes, EveryOpListsItsDtypesInOrder) {
  for (const OpDef* op : OpRegistry::global().all()) {
    EXPECT_FALSE(op->dtypes.empty()) << op->name;
    EXPECT_TRUE(std::is_sorted(op->dtypes.begin(), op->dtypes.end())) << op->name;
    EXPECT_EQ(std::adjacent_find(op->dtypes.begin(), op->dtypes.end()), op->dtypes.end()) << op->name;
  }
}

TEST(OpDtypes, ListedDtypesAreExactlyTheAcceptedOnes) {
  int checked = 0;
  for (const OpDef* op : OpRegistry::global().all()) {
    for (DType t : dtypes_all()) {
      const bool listed = std::find(op->dtypes.begin(), op->dtypes.end(), t) != op->dtypes.end();
      std::string why;
      const bool ok = accepts(*op, t, &why);
      EXPECT_EQ(ok, listed) << op->name << " " << dtype_name(t)
                            << (ok ? ": accepted, not listed" : ": listed, refused: ") << why;
      ++checked;
    }
  }
  EXPECT_GT(checked, 40 * kNumDTypes);
}

TEST(OpDtypes, Groups) {
  EXPECT_EQ(dtypes_all().size(), static_cast<size_t>(kNumDTypes));
  EXPECT_EQ(dtypes_join({dtypes_complex(), dtypes_floating()}),
            (DTypeList{DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64, DType::kComplex64,
                       DType::kComplex128}));
  EXPECT_EQ(dtypes_join({dtypes_integral(), dtypes_integral()}), dtypes_integral());
  const DTypeList real = dtypes_without(dtypes_all(), dtypes_complex());
  EXPECT_EQ(real.size(), static_cast<size_t>(kNumDTypes - 2));
  EXPECT_EQ(std::count(real.begin(), real.end(), DType::kComplex64), 0);
}

}  // namespace
}  // namespace tensord
