// The case table's assembly (one list of families, as register_all_ops),
// the ops covered elsewhere, and the helpers the families share.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "ops/convert.h"
#include "tests/unit/conformance/conformance.h"

namespace tensord::conformance {

const CaseTable& case_table() {
  static const CaseTable* table = [] {
    auto* t = new CaseTable();
    add_elementwise_cases(*t);
    add_compare_cases(*t);
    add_reduction_cases(*t);
    add_shape_cases(*t);
    add_creation_cases(*t);
    add_linalg_cases(*t);
    add_optim_cases(*t);
    return t;
  }();
  return *table;
}

// Control flow runs subprograms, not one kernel call: the graph layer
// parses, infers and runs it on whatever backend the job has. These names
// are not in the op registry today; listed so that registering them (for
// /v1/ops) does not need conformance cases they cannot have.
const std::vector<CoveredElsewhere>& covered_elsewhere() {
  static const std::vector<CoveredElsewhere> list = {
      {"cond", "tests/unit/graphs/control_flow_test.cpp", "control flow: runs a subprogram"},
      {"while_loop", "tests/unit/graphs/control_flow_test.cpp", "control flow: runs a subprogram"},
      {"scan", "tests/unit/graphs/control_flow_test.cpp", "control flow: runs a subprogram"},
      {"map", "tests/unit/graphs/control_flow_test.cpp", "control flow: runs a subprogram"},
      {"associative_scan", "tests/unit/graphs/associative_scan_test.cpp", "control flow: runs a subprogram"},
      // MX: checked there against a reference written from the OCP MX v1.0
      // spec (every format, both scale roundings, every boundary and tie);
      // the CUDA kernels against the CPU ones bit for bit in
      // tests/unit/cuda/mx_test.cpp (their results are MX tensors, which the
      // case runner does not compare).
      {"mx.quantize", "tests/unit/ops/mx_test.cpp", "MX: against the spec reference in its own test"},
      {"mx.dequantize", "tests/unit/ops/mx_test.cpp", "MX: against the spec reference in its own test"},
  };
  return list;
}

const Value* Call::find(const std::string& name) const {
  for (const auto& [n, v] : args) {
    if (n == name) return &v;
  }
  return nullptr;
}

const Tensor& Call::tensor(const std::string& name) const {
  const Value* v = find(name);
  if (!v || !std::holds_alternative<Tensor>(*v)) throw std::logic_error("case has no tensor argument " + name);
  return std::get<Tensor>(*v);
}

const Attr& Call::attr(const std::string& name) const {
  static const Attr kNone;
  const Value* v = find(name);
  return v && std::holds_alternative<Attr>(*v) ? std::get<Attr>(*v) : kNone;
}

OpCases& CaseTable::add(std::string op, DTypes dtypes) {
  EXPECT_EQ(find(op), nullptr) << "two case entries for " << op;
  cases_.push_back(OpCases{});
  cases_.back().op = std::move(op);
  cases_.back().dtypes = std::move(dtypes);
  return cases_.back();
}

const OpCases* CaseTable::find(const std::string& op) const {
  for (const auto& c : cases_) {
    if (c.op == op) return &c;
  }
  return nullptr;
}

// ---- dtype sets ----

DTypes all_dtypes() {
  DTypes s;
  for (int i = 0; i < kNumDTypes; ++i) s.insert(static_cast<DType>(i));
  return s;
}
DTypes integer_dtypes() {
  return {DType::kUInt8, DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64};
}
DTypes float8_dtypes() {
  return {DType::kFloat8E4M3FN, DType::kFloat8E5M2, DType::kFloat8E8M0FNU};
}
DTypes standard_float_dtypes() {
  return {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64};
}
DTypes complex_dtypes() {
  return {DType::kComplex64, DType::kComplex128};
}
DTypes join(std::initializer_list<DTypes> sets) {
  DTypes out;
  for (const auto& s : sets) out.insert(s.begin(), s.end());
  return out;
}
DTypes minus(DTypes a, const DTypes& b) {
  for (DType d : b) a.erase(d);
  return a;
}

// ---- arguments ----

Tensor random_tensor(DType d, Shape shape, Rng& rng, Range r) {
  Tensor t = Tensor::empty_host(d, std::move(shape));
  std::uniform_real_distribution<double> real(r.lo, r.hi);
  const auto ilo = static_cast<int64_t>(std::ceil(d == DType::kUInt8 ? std::max(r.lo, 0.0) : r.lo));
  const auto ihi = static_cast<int64_t>(std::floor(r.hi));
  std::uniform_int_distribution<int64_t> integer(ilo, std::max(ilo, ihi));
  std::uniform_int_distribution<int> exponent(-3, 3);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (d == DType::kBool) {
      store_from_double(d, t.data(), i, static_cast<double>(rng() & 1));
    } else if (is_integral(d, false)) {
      int64_t v = integer(rng);
      while (r.nonzero && v == 0 && ihi > ilo) v = integer(rng);
      store_from_double(d, t.data(), i, static_cast<double>(v));
    } else if (d == DType::kFloat8E8M0FNU) {
      store_from_double(d, t.data(), i, std::ldexp(1.0, exponent(rng)));
    } else if (r.whole && dtype_category(d) >= 2) {
      const auto re = static_cast<double>(integer(rng)), im = static_cast<double>(integer(rng));
      if (is_complex(d)) {
        store_from_complex(d, t.data(), i, {re, im});
      } else {
        store_from_double(d, t.data(), i, re);
      }
    } else if (is_complex(d)) {
      const double re = real(rng), im = real(rng);
      store_from_complex(d, t.data(), i, {re, im});
    } else {
      double v = real(rng);
      // Keep divisors away from zero in the dtype too (float8 rounds small
      // values to 0).
      while (r.nonzero && std::abs(v) < 0.25) v = real(rng);
      store_from_double(d, t.data(), i, v);
    }
  }
  return t;
}

Tensor tensor_of(DType d, Shape shape, const std::vector<double>& values) {
  Tensor t = Tensor::empty_host(d, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  for (int64_t i = 0; i < t.numel() && i < static_cast<int64_t>(values.size()); ++i) {
    store_from_double(d, t.data(), i, values[static_cast<size_t>(i)]);
  }
  return t;
}

Tensor number(double v) {
  Tensor t = Tensor::empty_host(DType::kFloat64, {});
  *t.data_ptr<double>() = v;
  t.set_wrapped_number(true);
  return t;
}

Tensor int_number(int64_t v) {
  Tensor t = Tensor::empty_host(DType::kInt64, {});
  *t.data_ptr<int64_t>() = v;
  t.set_wrapped_number(true);
  return t;
}

Tensor bool_number(bool v) {
  Tensor t = Tensor::empty_host(DType::kBool, {});
  *t.data_ptr<bool>() = v;
  t.set_wrapped_number(true);
  return t;
}

Attr dtype_attr(DType d) {
  return Attr(std::string(dtype_name(d)));
}

Tensor special_tensor(DType d, Shape shape, Rng& rng) {
  if (dtype_category(d) < 2) return random_tensor(d, std::move(shape), rng);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> specials = {nan, kInf, -kInf, -0.0, 0.0, 1e-30, -1e30, 0.5, -2.0};
  Tensor t = random_tensor(d, std::move(shape), rng);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (rng() % 3 != 0) continue;
    const double v = specials[rng() % specials.size()];
    if (is_complex(d)) {
      store_from_complex(d, t.data(), i, {v, (rng() & 1) ? v : 1.0});
    } else {
      store_from_double(d, t.data(), i, v);
    }
  }
  return t;
}

double dtype_epsilon(DType d) {
  switch (d) {
    case DType::kFloat64:
    case DType::kComplex128:
      return std::ldexp(1.0, -52);
    case DType::kFloat32:
    case DType::kComplex64:
      return std::ldexp(1.0, -23);
    case DType::kFloat16:
      return std::ldexp(1.0, -10);
    case DType::kBFloat16:
      return std::ldexp(1.0, -7);
    case DType::kFloat8E4M3FN:
      return std::ldexp(1.0, -3);
    case DType::kFloat8E5M2:
      return std::ldexp(1.0, -2);
    case DType::kFloat8E8M0FNU:
      return 1.0;
    default:
      return 0.0;
  }
}

}  // namespace tensord::conformance
