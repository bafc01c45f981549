// The conformance suite's case table (ggml's test-backend-ops, STYLE.md 6):
// for every registered op, argument generators (one per variant: shapes
// with broadcasting, empty and 0-d operands, attrs), the dtypes the op
// accepts, a tolerance, and optionally an independent reference and a
// property every backend's result must have. conformance_test.cpp runs each
// (op, dtype, variant) on every compiled backend against the CPU kernel.
//
// Adding an op: add its OpCases to the cases_<family>.cpp of its family
// (docs/conformance.md says how); a registered op without cases fails
// ConformanceCoverage.EveryRegisteredOpHasCases.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ops/attr.h"
#include "ops/dtype.h"
#include "ops/tensor.h"

namespace tensord::conformance {

using Rng = std::mt19937_64;
using DTypes = std::set<DType>;

// A tensor-list argument and the names its tensors were given by
// ("$stored/w" for an optimizer's parameters; "" for plain values).
struct TensorList {
  std::vector<Tensor> tensors;
  std::vector<std::string> names;
};

using Value = std::variant<Tensor, TensorList, Attr>;

// One call of an op: arguments by param name (omitted params take their
// defaults), the job's stored tensors before it, and how many times the
// kernel runs in a row over that state (optimizer steps).
struct Call {
  std::vector<std::pair<std::string, Value>> args;
  std::map<std::string, Tensor> stored;
  int steps = 1;

  Call& arg(std::string name, Value v) {
    args.emplace_back(std::move(name), std::move(v));
    return *this;
  }
  const Value* find(const std::string& name) const;
  const Tensor& tensor(const std::string& name) const;  // asserts it is a tensor argument
  const Attr& attr(const std::string& name) const;      // none when omitted
};

// What a call produced, in host memory: the kernel's outputs and the stored
// tensors after the last step.
struct Outcome {
  std::vector<Tensor> outs;
  std::map<std::string, Tensor> stored;
};

using MakeFn = std::function<Call(DType, Rng&)>;
// The expected outcome computed independently of the kernel (in double,
// complex<double> or int64), given the metas shape inference promised.
using RefFn = std::function<Outcome(const Call&, const std::vector<TensorMeta>&)>;
// "" when the outcome has the property, else what is wrong.
using CheckFn = std::function<std::string(const Call&, const Outcome&)>;

// How far a floating result may be from the expected one; integer and bool
// results compare exactly.
//  - float32, float64 and complex: |got - want| <= ulps * eps * (1 + |want|)
//    (the absolute floor covers cancellation: operands are about 1).
//  - float16, bfloat16, float8_e4m3fn, float8_e5m2: computed in float32
//    and rounded once, so within narrow_ulps of the result's spacing:
//    |got - want| <= narrow_ulps * eps * |want| + ulps * 2^-23 + the
//    dtype's smallest subnormal.
//  - float8_e8m0fnu (powers of two): within a factor of two.
// NaN matches only NaN; infinities must be equal.
struct Tolerance {
  double ulps = 2;
  double narrow_ulps = 2;
};

struct Variant {
  std::string name;
  MakeFn make;
  RefFn ref;    // replaces the op's reference for this variant (optional)
  DTypes only;  // empty: every dtype the op accepts
};

struct OpCases {
  std::string op;
  // The dtypes the op accepts: the first variant's shape inference must
  // accept exactly these (its dtype parameter is the operands' dtype).
  DTypes dtypes;
  std::vector<Variant> variants;
  Tolerance tol;
  RefFn ref;
  CheckFn check;
  // Outputs compared element by element across backends (empty: all);
  // eigenvectors, say, are unique only up to sign and are held to `check`.
  std::vector<size_t> compared_outputs;

  OpCases& variant(std::string name, MakeFn make, DTypes only = {}) {
    variants.push_back(Variant{std::move(name), std::move(make), nullptr, std::move(only)});
    return *this;
  }
  OpCases& variant_with_ref(std::string name, MakeFn make, RefFn r, DTypes only = {}) {
    variants.push_back(Variant{std::move(name), std::move(make), std::move(r), std::move(only)});
    return *this;
  }
  OpCases& tolerance_ulps(double u) {
    tol.ulps = u;
    return *this;
  }
  OpCases& narrow_tolerance_ulps(double u) {
    tol.narrow_ulps = u;
    return *this;
  }
  OpCases& reference(RefFn r) {
    ref = std::move(r);
    return *this;
  }
  OpCases& property(CheckFn c) {
    check = std::move(c);
    return *this;
  }
};

class CaseTable {
 public:
  OpCases& add(std::string op, DTypes dtypes);
  const OpCases* find(const std::string& op) const;
  const std::vector<OpCases>& all() const { return cases_; }

 private:
  std::vector<OpCases> cases_;
};

// The table, built once from every family's cases (cases.cpp).
const CaseTable& case_table();

// An op that cannot run as one standalone kernel call, and the test file
// that covers it (it must exist and name the op in a string literal).
struct CoveredElsewhere {
  std::string op;
  std::string test_file;  // relative to the source tree
  std::string why;
};
const std::vector<CoveredElsewhere>& covered_elsewhere();

// Families (one file each).
void add_elementwise_cases(CaseTable& t);
void add_compare_cases(CaseTable& t);
void add_reduction_cases(CaseTable& t);
void add_shape_cases(CaseTable& t);
void add_creation_cases(CaseTable& t);
void add_linalg_cases(CaseTable& t);
void add_optim_cases(CaseTable& t);

// ---- dtype sets ----
DTypes all_dtypes();
DTypes integer_dtypes();         // uint8 int8 int16 int32 int64
DTypes float8_dtypes();          // float8_e4m3fn float8_e5m2 float8_e8m0fnu
DTypes standard_float_dtypes();  // float16 bfloat16 float32 float64
DTypes complex_dtypes();
DTypes join(std::initializer_list<DTypes> sets);
DTypes minus(DTypes a, const DTypes& b);

// ---- argument helpers ----

// Value range of a generated tensor; ints take the integers in it, unsigned
// ones its non-negative part, bool 0/1, complex both parts, float8_e8m0fnu
// (powers of two, unsigned) 2^k for k in [-3, 3].
struct Range {
  double lo = -3;
  double hi = 3;
  bool nonzero = false;  // redraw zeros (divisors)
  bool whole = false;    // floating values are integers too (ties for comparisons)
};

Tensor random_tensor(DType d, Shape shape, Rng& rng, Range r = {});
// A tensor with the given values (cast with the library's cast rules).
Tensor tensor_of(DType d, Shape shape, const std::vector<double>& values);
// A JSON number bound to a Scalar|Tensor param (a wrapped 0-d tensor).
Tensor number(double v);
Tensor int_number(int64_t v);
Tensor bool_number(bool v);
Attr dtype_attr(DType d);

// Float NaN/inf/-0/large/tiny values mixed with ordinary ones (floating and
// complex dtypes; others get random_tensor).
Tensor special_tensor(DType d, Shape shape, Rng& rng);

// Machine epsilon of a result dtype (of its parts when complex); 0 for
// integer and bool dtypes.
double dtype_epsilon(DType d);

}  // namespace tensord::conformance
