// Variants and references shared by the elementwise families: the shapes
// every unary and binary op is run with (plain, broadcast, 0-d, empty, a
// Python number, mixed dtypes, NaN/inf, and one large enough for the
// thread pool's chunks), and references built on ref::elementwise.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "ops/type_promotion.h"
#include "tests/unit/conformance/conformance.h"
#include "tests/unit/conformance/reference.h"

namespace tensord::conformance {

using Metas = std::vector<TensorMeta>;

inline DTypes real_floating_dtypes() {
  return join({standard_float_dtypes(), float8_dtypes()});
}

// Large enough to split into several of the elementwise engine's chunks.
inline DTypes large_dtypes() {
  return {DType::kFloat32, DType::kFloat16, DType::kInt32};
}

// A Python number of the dtype's category (bool, int or float; complex
// dtypes get a float), in `r`.
inline Tensor number_like(DType d, const Range& r) {
  if (d == DType::kBool) return bool_number(true);
  if (is_integral(d, false)) return int_number(r.lo > 2 || r.hi < 2 ? static_cast<int64_t>(r.hi) : 2);
  return number(r.lo > 1.5 || r.hi < 1.5 ? r.hi : 1.5);
}

inline void add_unary_variants(OpCases& c, Range r = {}) {
  c.variant("shape", [r](DType d, Rng& g) { return Call().arg("input", random_tensor(d, {3, 5}, g, r)); });
  c.variant("0-d", [r](DType d, Rng& g) { return Call().arg("input", random_tensor(d, {}, g, r)); });
  c.variant("empty", [r](DType d, Rng& g) { return Call().arg("input", random_tensor(d, {0, 4}, g, r)); });
  c.variant(
      "special",
      [](DType d, Rng& g) {
        return Call().arg("input", special_tensor(d, {4, 6}, g));
      },
      real_floating_dtypes());
  c.variant(
      "large", [r](DType d, Rng& g) { return Call().arg("input", random_tensor(d, {70001}, g, r)); }, large_dtypes());
}

struct BinaryArgs {
  std::string input = "input";
  std::string other = "other";
  Range lhs{};
  Range rhs{};
};

inline void add_binary_variants(OpCases& c, const BinaryArgs& b) {
  auto two = [b](Shape sx, Shape sy) {
    return [b, sx, sy](DType d, Rng& g) {
      return Call().arg(b.input, random_tensor(d, sx, g, b.lhs)).arg(b.other, random_tensor(d, sy, g, b.rhs));
    };
  };
  c.variant("same", two({3, 4}, {3, 4}));
  c.variant("broadcast", two({2, 1, 4}, {3, 1}));
  c.variant("0-d other", two({5}, {}));
  c.variant("empty", two({0, 3}, {1, 3}));
  c.variant("number", [b](DType d, Rng& g) {
    return Call().arg(b.input, random_tensor(d, {2, 3}, g, b.lhs)).arg(b.other, number_like(d, b.rhs));
  });
  c.variant("float number", [b](DType d, Rng& g) {
    return Call().arg(b.input, random_tensor(d, {2, 3}, g, b.lhs)).arg(b.other, number(b.rhs.lo > 0.5 ? 1.5 : 0.5));
  });
  c.variant("mixed dtypes", [b](DType d, Rng& g) {
    return Call()
        .arg(b.input, random_tensor(d, {3, 4}, g, b.lhs))
        .arg(b.other, random_tensor(DType::kFloat32, {4}, g, b.rhs));
  });
  c.variant(
      "special",
      [b](DType d, Rng& g) {
        return Call().arg(b.input, special_tensor(d, {5, 4}, g)).arg(b.other, special_tensor(d, {5, 4}, g));
      },
      real_floating_dtypes());
  c.variant("large", two({70, 1001}, {1001}), large_dtypes());
}

// Reference of a unary op computing in `compute(input dtype)`.
inline RefFn unary_ref(DType (*compute)(DType), ref::RealFn f, ref::ComplexFn cf) {
  return [compute, f, cf](const Call& c, const Metas& m) {
    const Tensor& x = c.tensor("input");
    return Outcome{{ref::elementwise(m[0], compute(x.dtype()), {x}, f, cf)}, {}};
  };
}

inline DType same_dtype(DType d) {
  return d;
}

// A binary reference over the named operands, computing in their promoted
// dtype; `make` builds the functions from the call (alpha, say).
// keep_numbers: see ref::elementwise.
template <class Make>
RefFn binary_ref(std::string a, std::string b, Make make, bool keep_numbers = false) {
  return [a, b, make, keep_numbers](const Call& c, const Metas& m) {
    const Tensor& x = c.tensor(a);
    const Tensor& y = c.tensor(b);
    const auto [f, cf] = make(c);
    return Outcome{{ref::elementwise(m[0], result_type(x.meta(), y.meta()), {x, y}, f, cf, keep_numbers)}, {}};
  };
}

}  // namespace tensord::conformance
