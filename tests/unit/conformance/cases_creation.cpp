// Creation ops: full zeros ones arange rand randn. The dtype a case runs
// at is the dtype= argument; rand/randn are seeded (determinism is checked
// by the driver) and held to range and moment properties.
#include <cmath>
#include <string>

#include "tests/unit/conformance/variants.h"

namespace tensord::conformance {
namespace {

using Dims = std::vector<int64_t>;

Outcome filled(const TensorMeta& m, double v) {
  Tensor r = Tensor::zeros_host(m.dtype, m.shape);
  for (int64_t i = 0; i < r.numel(); ++i) ref::store(r, i, v);
  return Outcome{{r}, {}};
}

void add_full(CaseTable& t) {
  OpCases& c = t.add("full", all_dtypes());
  c.reference([](const Call& call, const Metas& m) { return filled(m[0], call.attr("fill_value").to_double("v")); });
  auto full = [](Dims size, Attr v) {
    return [size, v](DType d, Rng&) {
      return Call().arg("size", Attr(size)).arg("fill_value", v).arg("dtype", dtype_attr(d));
    };
  };
  c.variant("int value", full({2, 3}, Attr(int64_t{1})));
  c.variant("float value", full({4}, Attr(2.5)));
  c.variant("bool value", full({3}, Attr(true)));
  c.variant("0-d", full({}, Attr(int64_t{2})));
  c.variant("empty", full({0, 3}, Attr(int64_t{1})));
  c.variant("large", full({70001}, Attr(int64_t{3})), large_dtypes());
  // dtype=None infers bool, int64 or float32 from the value.
  for (const auto& [name, v] : {std::pair<const char*, Attr>{"inferred int64", Attr(int64_t{-4})},
                                {"inferred float32", Attr(0.75)},
                                {"inferred bool", Attr(false)}}) {
    Attr value = v;
    c.variant(name,
              [value](DType, Rng&) {
                return Call().arg("size", Attr(Dims{2, 2})).arg("fill_value", value);
              },
              {DType::kFloat32});
  }
}

void add_zeros_ones(CaseTable& t) {
  for (const bool one : {false, true}) {
    OpCases& c = t.add(one ? "ones" : "zeros", all_dtypes());
    c.reference([one](const Call&, const Metas& m) { return filled(m[0], one ? 1 : 0); });
    for (const Dims& size : {Dims{2, 3}, Dims{}, Dims{0, 4}, Dims{5, 1, 2}}) {
      c.variant(shape_str(size),
                [size](DType d, Rng&) { return Call().arg("size", Attr(size)).arg("dtype", dtype_attr(d)); });
    }
    c.variant("default dtype", [](DType, Rng&) { return Call().arg("size", Attr(Dims{3})); }, {DType::kFloat32});
  }
}

void add_arange(CaseTable& t) {
  OpCases& c = t.add("arange", join({integer_dtypes(), standard_float_dtypes()}));
  c.reference([](const Call& call, const Metas& m) {
    const Attr& e = call.attr("end");
    const Attr& st = call.attr("step");
    const double a = e.is_none() ? 0 : call.attr("start").to_double("start");
    const double step = st.is_none() ? 1 : st.to_double("step");
    Tensor r = Tensor::zeros_host(m[0].dtype, m[0].shape);
    for (int64_t i = 0; i < r.numel(); ++i) ref::store(r, i, a + static_cast<double>(i) * step);
    return Outcome{{r}, {}};
  });
  auto range = [](Attr start, Attr end, Attr step) {
    return [start, end, step](DType d, Rng&) {
      Call c;
      c.arg("start", start);
      if (!end.is_none()) c.arg("end", end);
      if (!step.is_none()) c.arg("step", step);
      return c.arg("dtype", dtype_attr(d));
    };
  };
  c.variant("ints", range(Attr(int64_t{0}), Attr(int64_t{5}), Attr(int64_t{1})));
  c.variant("end only", range(Attr(int64_t{6}), Attr(), Attr()));
  c.variant("step 3", range(Attr(int64_t{2}), Attr(int64_t{11}), Attr(int64_t{3})));
  c.variant("negative step", range(Attr(int64_t{5}), Attr(int64_t{-1}), Attr(int64_t{-2})));
  c.variant("float step", range(Attr(0.0), Attr(2.0), Attr(0.25)));
  c.variant("empty", range(Attr(int64_t{3}), Attr(int64_t{3}), Attr()));
  c.variant("large", range(Attr(int64_t{0}), Attr(int64_t{70001}), Attr()), {DType::kFloat32, DType::kInt32});
  c.variant("inferred int64", [](DType, Rng&) { return Call().arg("start", Attr(int64_t{4})); }, {DType::kFloat32});
  c.variant("inferred float32", [](DType, Rng&) { return Call().arg("start", Attr(0.5)).arg("end", Attr(2.0)); },
            {DType::kFloat32});
}

// rand: every part in [0, 1); randn: finite, and over a large draw the
// mean and standard deviation of a standard normal.
std::string random_property(bool normal, const Outcome& o) {
  const Tensor& x = o.outs.at(0);
  const bool cplx = is_complex(x.dtype());
  double sum = 0, sq = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const ref::C z = ref::cvalue(x, i);
    const double parts[2] = {z.real(), z.imag()};
    for (int k = 0; k < (cplx ? 2 : 1); ++k) {
      const double v = parts[k];
      if (!std::isfinite(v)) return "element " + std::to_string(i) + " is not finite";
      if (!normal && (v < 0 || v >= 1))
        return "element " + std::to_string(i) + " = " + std::to_string(v) + " not in [0, 1)";
      sum += v;
      sq += v * v;
      ++n;
    }
  }
  if (n < 4096) return "";
  const double mean = sum / static_cast<double>(n);
  const double sd = std::sqrt(sq / static_cast<double>(n) - mean * mean);
  const double want_mean = normal ? 0 : 0.5, want_sd = normal ? (cplx ? std::sqrt(0.5) : 1.0) : std::sqrt(1.0 / 12);
  if (std::abs(mean - want_mean) > 0.05 || std::abs(sd - want_sd) > 0.05 * (want_sd + 0.5)) {
    return "mean " + std::to_string(mean) + ", sd " + std::to_string(sd) + " over " + std::to_string(n) + " values";
  }
  return "";
}

void add_random(CaseTable& t) {
  for (const bool normal : {false, true}) {
    OpCases& c = t.add(normal ? "randn" : "rand", join({standard_float_dtypes(), complex_dtypes()}));
    c.property([normal](const Call&, const Outcome& o) { return random_property(normal, o); });
    auto draw = [](Dims size, int64_t seed) {
      return [size, seed](DType d, Rng&) {
        return Call().arg("size", Attr(size)).arg("dtype", dtype_attr(d)).arg("seed", Attr(seed));
      };
    };
    c.variant("seeded", draw({3, 5}, 7));
    c.variant("0-d", draw({}, 1));
    c.variant("empty", draw({0, 2}, 1));
    c.variant("odd size", draw({7}, 123456789));
    c.variant("moments", draw({64, 128}, 42));
  }
}

}  // namespace

void add_creation_cases(CaseTable& t) {
  add_full(t);
  add_zeros_ones(t);
  add_arange(t);
  add_random(t);
}

}  // namespace tensord::conformance
