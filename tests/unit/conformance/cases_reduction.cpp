// Reductions: sum mean amax amin argmax norm, over all dims, some dims
// (negative, keepdim), 0-d and empty inputs.
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "tests/unit/conformance/variants.h"

namespace tensord::conformance {
namespace {

using ref::C;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

std::vector<int64_t> dims_of(const Call& c) {
  const Attr& d = c.attr("dim");
  if (d.is_none()) return {};
  return d.to_int_list("dim");
}

// A reduction reference: f over each group of real values, cf over complex.
RefFn reduce_ref(ref::RealReduce f, ref::ComplexReduce cf) {
  return [f, cf](const Call& c, const Metas& m) {
    return Outcome{{ref::reduce(c.tensor("input"), m[0], dims_of(c), f, cf)}, {}};
  };
}

Call reduce_call(DType d, Shape s, Rng& g, Attr dim = Attr(), bool keepdim = false, Range r = {}) {
  Call c;
  c.arg("input", random_tensor(d, std::move(s), g, r));
  if (!dim.is_none()) c.arg("dim", std::move(dim));
  if (keepdim) c.arg("keepdim", Attr(true));
  return c;
}

using Dims = std::vector<int64_t>;

// Variants over dims; `all_default` names what dim=None means for the op.
void add_dim_variants(OpCases& c, Range r = {}, bool empty_reduces = true) {
  c.variant("all", [r](DType d, Rng& g) { return reduce_call(d, {3, 4}, g, Attr(), false, r); });
  c.variant("dim 1", [r](DType d, Rng& g) { return reduce_call(d, {3, 4}, g, Attr(Dims{1}), false, r); });
  c.variant("dims 0 and 2, keepdim", [r](DType d, Rng& g) {
    return reduce_call(d, {2, 3, 4}, g, Attr(Dims{0, 2}), true, r);
  });
  c.variant("negative dim", [r](DType d, Rng& g) { return reduce_call(d, {3, 4, 2}, g, Attr(Dims{-1}), false, r); });
  c.variant("0-d", [r](DType d, Rng& g) { return reduce_call(d, {}, g, Attr(), false, r); });
  c.variant("empty output", [r](DType d, Rng& g) { return reduce_call(d, {0, 3}, g, Attr(Dims{1}), false, r); });
  if (empty_reduces) {
    c.variant("empty input", [r](DType d, Rng& g) { return reduce_call(d, {0, 3}, g, Attr(Dims{0}), false, r); });
  }
  c.variant(
      "special",
      [](DType d, Rng& g) {
        return Call().arg("input", special_tensor(d, {4, 5}, g)).arg("dim", Attr(Dims{1}));
      },
      real_floating_dtypes());
  c.variant(
      "large rows",
      [r](DType d, Rng& g) {
        return reduce_call(d, {300, 250}, g, Attr(Dims{0}), false, r);
      },
      large_dtypes());
  c.variant(
      "large all",
      [r](DType d, Rng& g) {
        return reduce_call(d, {300, 250}, g, Attr(), false, r);
      },
      large_dtypes());
}

double sum_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
C csum_of(const std::vector<C>& v) {
  C s = 0;
  for (const C& x : v) s += x;
  return s;
}

void add_sum_mean(CaseTable& t) {
  OpCases& sum = t.add("sum", all_dtypes());
  sum.tolerance_ulps(4).reference(reduce_ref(sum_of, csum_of));
  add_dim_variants(sum);
  sum.variant(
      "dtype float64",
      [](DType d, Rng& g) {
        return reduce_call(d, {3, 4}, g, Attr(Dims{0})).arg("dtype", dtype_attr(DType::kFloat64));
      },
      minus(all_dtypes(), complex_dtypes()));

  OpCases& mean = t.add("mean", join({standard_float_dtypes(), float8_dtypes(), complex_dtypes()}));
  mean.tolerance_ulps(4).reference(
      reduce_ref([](const std::vector<double>& v) { return sum_of(v) / static_cast<double>(v.size()); },
                 [](const std::vector<C>& v) { return csum_of(v) / static_cast<double>(v.size()); }));
  add_dim_variants(mean);
  mean.variant("int16 input, dtype float64",
               [](DType, Rng& g) {
                 return reduce_call(DType::kInt16, {3, 4}, g, Attr(Dims{1})).arg("dtype", dtype_attr(DType::kFloat64));
               },
               {DType::kFloat32});
}

void add_max_min(CaseTable& t) {
  for (const bool max : {true, false}) {
    OpCases& c = t.add(max ? "amax" : "amin", minus(all_dtypes(), complex_dtypes()));
    c.reference(reduce_ref(
        [max](const std::vector<double>& v) {
          double r = max ? -kInf : kInf;
          for (double x : v) {
            if (std::isnan(x)) return kNaN;
            r = max ? std::max(r, x) : std::min(r, x);
          }
          return r;
        },
        nullptr));
    add_dim_variants(c, {-2, 2, false, true}, false);
  }
}

void add_argmax(CaseTable& t) {
  OpCases& c = t.add("argmax", minus(all_dtypes(), complex_dtypes()));
  // The first maximum; NaN is the maximum (the first NaN wins).
  c.reference([](const Call& call, const Metas& m) {
    const Attr& dim = call.attr("dim");
    const Dims dims = dim.is_none() ? Dims{} : Dims{dim.to_int("dim")};
    auto first_max = [](const std::vector<double>& v) {
      size_t best = 0;
      for (size_t i = 1; i < v.size(); ++i) {
        if (std::isnan(v[best])) break;
        if (std::isnan(v[i]) || v[i] > v[best]) best = i;
      }
      return static_cast<double>(best);
    };
    return Outcome{{ref::reduce(call.tensor("input"), m[0], dims, first_max)}, {}};
  });
  const Range ties{-2, 2, false, true};
  c.variant("flattened", [ties](DType d, Rng& g) { return reduce_call(d, {3, 4}, g, Attr(), false, ties); });
  c.variant("dim 0", [ties](DType d, Rng& g) { return reduce_call(d, {5, 3}, g, Attr(int64_t{0}), false, ties); });
  c.variant("dim -1, keepdim", [ties](DType d, Rng& g) {
    return reduce_call(d, {2, 3, 4}, g, Attr(int64_t{-1}), true, ties);
  });
  c.variant("0-d", [ties](DType d, Rng& g) { return reduce_call(d, {}, g, Attr(), false, ties); });
  c.variant("empty output", [ties](DType d, Rng& g) {
    return reduce_call(d, {0, 3}, g, Attr(int64_t{1}), false, ties);
  });
  c.variant(
      "special",
      [](DType d, Rng& g) {
        return Call().arg("input", special_tensor(d, {4, 6}, g)).arg("dim", Attr(int64_t{1}));
      },
      real_floating_dtypes());
  c.variant(
      "large",
      [ties](DType d, Rng& g) {
        return reduce_call(d, {300, 250}, g, Attr(int64_t{0}), false, ties);
      },
      large_dtypes());
}

// Vector p-norm of |x| values.
double pnorm(const std::vector<double>& a, const Attr& p) {
  std::string s = p.is_string() ? p.to_string("p") : "";
  double q = s.empty() ? p.to_double("p") : 0;
  if (s == "fro") {
    s.clear();
    q = 2;
  }
  double r = 0;
  if (s == "inf" || (s.empty() && q == kInf)) {
    for (double x : a) r = std::isnan(x) || std::isnan(r) ? kNaN : std::max(r, x);
  } else if (s == "-inf" || (s.empty() && q == -kInf)) {
    r = kInf;
    for (double x : a) r = std::isnan(x) || std::isnan(r) ? kNaN : std::min(r, x);
  } else if (q == 0) {
    for (double x : a) r += x != 0 ? 1 : 0;
  } else {
    for (double x : a) r += std::pow(x, q);
    r = std::pow(r, 1 / q);
  }
  return r;
}

void add_norm(CaseTable& t) {
  OpCases& c = t.add("norm", join({standard_float_dtypes(), float8_dtypes(), complex_dtypes()}));
  c.tolerance_ulps(4).reference([](const Call& call, const Metas& m) {
    Attr p = call.attr("p");
    if (p.is_none()) p = Attr(2.0);
    return Outcome{{ref::reduce(
                       call.tensor("input"), m[0], dims_of(call),
                       [p](const std::vector<double>& v) {
                         std::vector<double> a;
                         for (double x : v) a.push_back(std::abs(x));
                         return pnorm(a, p);
                       },
                       [p](const std::vector<C>& v) {
                         std::vector<double> a;
                         for (const C& z : v) a.push_back(std::abs(z));
                         return C(pnorm(a, p), 0);
                       })},
                   {}};
  });
  add_dim_variants(c, {}, true);
  const std::pair<const char*, Attr> ps[] = {{"1", Attr(1.0)},     {"3", Attr(int64_t{3})},   {"0", Attr(0.0)},
                                             {"0.5", Attr(0.5)},   {"inf", Attr("inf")},      {"-inf", Attr("-inf")},
                                             {"fro", Attr("fro")}, {"inf number", Attr(kInf)}};
  for (const auto& [name, p] : ps) {
    c.variant(std::string("p=") + name, [p = p](DType d, Rng& g) {
      return reduce_call(d, {3, 5}, g, Attr(Dims{1})).arg("p", p);
    });
  }
  c.variant("float32 input, dtype float64",
            [](DType d, Rng& g) {
              return reduce_call(d, {4, 3}, g).arg("dtype", dtype_attr(DType::kFloat64));
            },
            {DType::kFloat32});
}

}  // namespace

void add_reduction_cases(CaseTable& t) {
  add_sum_mean(t);
  add_max_min(t);
  add_argmax(t);
  add_norm(t);
}

}  // namespace tensord::conformance
