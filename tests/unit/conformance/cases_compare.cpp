// Comparisons, logic and where: eq ne lt le gt ge logical_and logical_or
// where. Operands are drawn from whole numbers so that ties occur.
#include <cmath>
#include <utility>

#include "tests/unit/conformance/variants.h"

namespace tensord::conformance {
namespace {

using ref::C;

constexpr Range kTies{-2, 2, false, true};

void add_comparisons(CaseTable& t) {
  struct Cmp {
    const char* name;
    bool (*f)(double, double);
    bool complex;
  };
  const Cmp cmps[] = {
      {"eq", [](double a, double b) { return a == b; }, true}, {"ne", [](double a, double b) { return a != b; }, true},
      {"lt", [](double a, double b) { return a < b; }, false}, {"le", [](double a, double b) { return a <= b; }, false},
      {"gt", [](double a, double b) { return a > b; }, false}, {"ge", [](double a, double b) { return a >= b; }, false},
  };
  for (const Cmp& cmp : cmps) {
    auto f = cmp.f;
    const bool ne = std::string(cmp.name) == "ne";
    OpCases& c = t.add(cmp.name, cmp.complex ? all_dtypes() : minus(all_dtypes(), complex_dtypes()));
    c.reference(binary_ref("input", "other", [f, ne](const Call&) {
      return std::pair<ref::RealFn, ref::ComplexFn>{[f](const double* v) { return f(v[0], v[1]) ? 1.0 : 0.0; },
                                                    [ne](const C* v) { return C((v[0] == v[1]) != ne ? 1 : 0, 0); }};
    }));
    add_binary_variants(c, {.lhs = kTies, .rhs = kTies});
  }
}

void add_logical(CaseTable& t) {
  for (const bool is_and : {true, false}) {
    OpCases& c = t.add(is_and ? "logical_and" : "logical_or", all_dtypes());
    // Each operand is read as != 0 in its own dtype (no promotion):
    // complex128 holds every operand exactly.
    c.reference([is_and](const Call& call, const Metas& m) {
      return Outcome{{ref::elementwise(m[0], DType::kComplex128, {call.tensor("input"), call.tensor("other")}, nullptr,
                                       [is_and](const C* v) {
                                         const bool a = v[0] != C(0, 0), b = v[1] != C(0, 0);
                                         return C((is_and ? a && b : a || b) ? 1 : 0, 0);
                                       })},
                     {}};
    });
    add_binary_variants(c, {.lhs = {-1, 1}, .rhs = {-1, 1}});
  }
}

void add_where(CaseTable& t) {
  OpCases& c = t.add("where", all_dtypes());
  c.reference([](const Call& call, const Metas& m) {
    // Selection is exact: complex128 carries either operand to the result.
    return Outcome{{ref::elementwise(m[0], DType::kComplex128,
                                     {call.tensor("condition"), call.tensor("input"), call.tensor("other")}, nullptr,
                                     [](const C* v) { return v[0] != C(0, 0) ? v[1] : v[2]; })},
                   {}};
  });
  auto cond = [](Shape s, Rng& g) { return random_tensor(DType::kBool, std::move(s), g); };
  c.variant("same", [cond](DType d, Rng& g) {
    return Call()
        .arg("condition", cond({3, 4}, g))
        .arg("input", random_tensor(d, {3, 4}, g))
        .arg("other", random_tensor(d, {3, 4}, g));
  });
  c.variant("broadcast", [cond](DType d, Rng& g) {
    return Call()
        .arg("condition", cond({2, 1, 1}, g))
        .arg("input", random_tensor(d, {3, 1}, g))
        .arg("other", random_tensor(d, {4}, g));
  });
  c.variant("numbers", [cond](DType d, Rng& g) {
    return Call().arg("condition", cond({5}, g)).arg("input", random_tensor(d, {5}, g)).arg("other", number(0.5));
  });
  c.variant("int number", [cond](DType d, Rng& g) {
    return Call().arg("condition", cond({2, 3}, g)).arg("input", int_number(1)).arg("other", random_tensor(d, {3}, g));
  });
  c.variant("mixed dtypes", [cond](DType d, Rng& g) {
    return Call()
        .arg("condition", cond({4}, g))
        .arg("input", random_tensor(d, {4}, g))
        .arg("other", random_tensor(DType::kFloat32, {4}, g));
  });
  c.variant("0-d", [cond](DType d, Rng& g) {
    return Call()
        .arg("condition", cond({}, g))
        .arg("input", random_tensor(d, {}, g))
        .arg("other", random_tensor(d, {}, g));
  });
  c.variant("empty", [cond](DType d, Rng& g) {
    return Call()
        .arg("condition", cond({0, 2}, g))
        .arg("input", random_tensor(d, {2}, g))
        .arg("other", random_tensor(d, {1}, g));
  });
  c.variant(
      "special",
      [cond](DType d, Rng& g) {
        return Call()
            .arg("condition", cond({4, 5}, g))
            .arg("input", special_tensor(d, {4, 5}, g))
            .arg("other", special_tensor(d, {4, 5}, g));
      },
      real_floating_dtypes());
  c.variant(
      "large",
      [cond](DType d, Rng& g) {
        return Call()
            .arg("condition", cond({70, 1001}, g))
            .arg("input", random_tensor(d, {1001}, g))
            .arg("other", random_tensor(d, {70, 1}, g));
      },
      large_dtypes());
}

}  // namespace

void add_compare_cases(CaseTable& t) {
  add_comparisons(t);
  add_logical(t);
  add_where(t);
}

}  // namespace tensord::conformance
