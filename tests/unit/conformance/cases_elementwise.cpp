// Elementwise arithmetic: the unary ops, clamp, add sub mul div pow
// maximum minimum, and the casts to and copy_.
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "tests/unit/conformance/variants.h"

namespace tensord::conformance {
namespace {

using ref::C;
using Fns = std::pair<ref::RealFn, ref::ComplexFn>;

const double kNaN = std::numeric_limits<double>::quiet_NaN();

DType floating_of(DType d) {
  return to_floating_default(d);
}

void add_unary(CaseTable& t) {
  struct Fn {
    const char* name;
    double (*f)(double);
    C (*cf)(C);
    double ulps;
  };
  const Fn floating[] = {
      {"exp", [](double x) { return std::exp(x); }, [](C z) { return std::exp(z); }, 4},
      {"log", [](double x) { return std::log(x); }, [](C z) { return std::log(z); }, 4},
      {"sqrt", [](double x) { return std::sqrt(x); }, [](C z) { return std::sqrt(z); }, 2},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); }, [](C z) { return 1. / std::sqrt(z); }, 4},
      {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, [](C z) { return 1. / (1. + std::exp(-z)); }, 4},
      {"tanh", [](double x) { return std::tanh(x); }, [](C z) { return std::tanh(z); }, 4},
  };
  for (const Fn& fn : floating) {
    auto f = fn.f;
    auto cf = fn.cf;
    OpCases& c = t.add(fn.name, all_dtypes());
    c.tolerance_ulps(fn.ulps).reference(unary_ref(
        floating_of, [f](const double* v) { return f(v[0]); }, [cf](const C* v) { return cf(v[0]); }));
    add_unary_variants(c);
  }

  OpCases& neg = t.add("neg", minus(all_dtypes(), {DType::kBool}));
  neg.reference(unary_ref(
      same_dtype, [](const double* v) { return -v[0]; }, [](const C* v) { return -v[0]; }));
  add_unary_variants(neg);

  OpCases& abs = t.add("abs", all_dtypes());
  abs.reference([](const Call& c, const Metas& m) {
    const Tensor& x = c.tensor("input");
    return Outcome{{ref::elementwise(
                       m[0], x.dtype(), {x}, [](const double* v) { return std::abs(v[0]); },
                       [](const C* v) { return C(std::abs(v[0]), 0); })},
                   {}};
  });
  add_unary_variants(abs);

  OpCases& relu = t.add("relu", minus(all_dtypes(), join({complex_dtypes(), {DType::kBool}})));
  relu.reference(unary_ref(
      same_dtype, [](const double* v) { return std::isnan(v[0]) ? v[0] : std::max(v[0], 0.0); }, nullptr));
  add_unary_variants(relu);

  OpCases& lnot = t.add("logical_not", all_dtypes());
  lnot.reference([](const Call& c, const Metas& m) {
    const Tensor& x = c.tensor("input");
    return Outcome{{ref::elementwise(
                       m[0], DType::kComplex128, {x}, [](const double* v) { return v[0] == 0 ? 1.0 : 0.0; },
                       [](const C* v) { return C(v[0] == C(0, 0) ? 1 : 0, 0); })},
                   {}};
  });
  add_unary_variants(lnot);
}

double clamp_of(double x, double lo, double hi) {
  if (std::isnan(x)) return x;
  double r = x < lo ? lo : x;
  return r > hi ? hi : r;
}

void add_clamp(CaseTable& t) {
  OpCases& c = t.add("clamp", minus(all_dtypes(), join({complex_dtypes(), {DType::kBool}})));
  c.reference([](const Call& call, const Metas& m) {
    const Tensor& x = call.tensor("input");
    std::vector<Tensor> ins{x};
    std::vector<TensorMeta> metas{x.meta()};
    const bool lo = call.find("min") != nullptr, hi = call.find("max") != nullptr;
    if (lo) ins.push_back(call.tensor("min"));
    if (hi) ins.push_back(call.tensor("max"));
    for (size_t i = 1; i < ins.size(); ++i) metas.push_back(ins[i].meta());
    const double inf = std::numeric_limits<double>::infinity();
    return Outcome{{ref::elementwise(m[0], result_type(metas), ins,
                                     [lo, hi, inf](const double* v) {
                                       return clamp_of(v[0], lo ? v[1] : -inf, hi ? v[lo ? 2 : 1] : inf);
                                     })},
                   {}};
  });
  c.variant("tensor bounds", [](DType d, Rng& g) {
    return Call()
        .arg("input", random_tensor(d, {3, 4}, g))
        .arg("min", random_tensor(d, {3, 4}, g, {-3, 0}))
        .arg("max", random_tensor(d, {4}, g, {0, 3}));
  });
  c.variant("number bounds", [](DType d, Rng& g) {
    const bool f = dtype_category(d) >= 2;
    return Call()
        .arg("input", random_tensor(d, {2, 5}, g))
        .arg("min", f ? number(-1.5) : int_number(d == DType::kUInt8 ? 1 : -1))
        .arg("max", f ? number(1.5) : int_number(2));
  });
  c.variant("min only", [](DType d, Rng& g) {
    return Call().arg("input", random_tensor(d, {6}, g)).arg("min", random_tensor(d, {}, g));
  });
  c.variant("max only",
            [](DType d, Rng& g) { return Call().arg("input", random_tensor(d, {6}, g)).arg("max", int_number(1)); });
  c.variant("min above max", [](DType d, Rng& g) {
    return Call().arg("input", random_tensor(d, {5}, g)).arg("min", int_number(2)).arg("max", int_number(1));
  });
  c.variant("float bounds promote", [](DType d, Rng& g) {
    return Call().arg("input", random_tensor(d, {5}, g)).arg("min", number(-0.5)).arg("max", number(0.5));
  });
  c.variant("empty", [](DType d, Rng& g) {
    return Call().arg("input", random_tensor(d, {0, 2}, g)).arg("min", random_tensor(d, {2}, g));
  });
  c.variant(
      "special",
      [](DType d, Rng& g) {
        return Call().arg("input", special_tensor(d, {4, 5}, g)).arg("min", number(-1)).arg("max", number(1));
      },
      real_floating_dtypes());
}

// z ** e; a small whole real exponent by repeated multiplication, as
// exactly as the kernels' special cases (exp(e log z) loses digits).
C complex_pow(const C* v) {
  const C z = v[0], e = v[1];
  if (e.imag() != 0 || e.real() != std::round(e.real()) || std::abs(e.real()) > 64) return std::pow(z, e);
  C r = 1;
  for (int k = 0; k < std::abs(static_cast<int>(e.real())); ++k) r *= z;
  return e.real() < 0 ? 1. / r : r;
}

double alpha_of(const Call& c) {
  const Attr& a = c.attr("alpha");
  return a.is_none() ? 1.0 : a.to_double("alpha");
}

void add_arith(CaseTable& t) {
  for (const bool sub : {false, true}) {
    OpCases& c = t.add(sub ? "sub" : "add", sub ? minus(all_dtypes(), {DType::kBool}) : all_dtypes());
    c.reference(binary_ref("input", "other", [sub](const Call& call) {
      const double al = alpha_of(call) * (sub ? -1 : 1);
      return Fns{[al](const double* v) { return v[0] + al * v[1]; }, [al](const C* v) { return v[0] + al * v[1]; }};
    }));
    add_binary_variants(c, {});
    c.variant("alpha", [](DType d, Rng& g) {
      return Call()
          .arg("input", random_tensor(d, {4}, g))
          .arg("other", random_tensor(d, {4}, g))
          .arg("alpha", Attr(int64_t{2}));
    });
    c.variant("float alpha", [](DType d, Rng& g) {
      return Call().arg("input", random_tensor(d, {4}, g)).arg("other", number(0.25)).arg("alpha", Attr(-1.5));
    });
  }

  OpCases& mul = t.add("mul", all_dtypes());
  mul.reference(binary_ref(
      "input", "other",
      [](const Call&) {
        return Fns{[](const double* v) { return v[0] * v[1]; }, [](const C* v) { return v[0] * v[1]; }};
      },
      true));
  add_binary_variants(mul, {});

  OpCases& div = t.add("div", all_dtypes());
  // True division takes a Python number at full precision; trunc and floor
  // see it cast to the dtype.
  auto div_fns = [](const std::string& m) {
    auto f = [m](const double* v) {
      const double a = v[0], b = v[1];
      if (m == "trunc") return std::trunc(a / b);
      if (m != "floor") return a / b;
      if (b == 0) return a / b;
      // Python's a // b, as PyTorch's div_floor_floating.
      const double mod = std::fmod(a, b);
      double q = (a - mod) / b;
      if (mod != 0 && (b < 0) != (mod < 0)) q -= 1;
      double fq = q != 0 ? std::floor(q) : std::copysign(0.0, a / b);
      if (q - fq > 0.5) fq += 1;
      return fq;
    };
    return Fns{f, [](const C* v) { return v[0] / v[1]; }};
  };
  div.reference([div_fns](const Call& call, const Metas& m) {
    const Attr& mode = call.attr("rounding_mode");
    const std::string name = mode.is_none() ? "" : mode.to_string("rounding_mode");
    return binary_ref(
        "input", "other", [&](const Call&) { return div_fns(name); }, name.empty())(call, m);
  });
  add_binary_variants(div, {.rhs = Range{-3, 3, true}});
  for (const char* mode : {"trunc", "floor"}) {
    div.variant(std::string(mode), [mode](DType d, Rng& g) {
      return Call()
          .arg("input", random_tensor(d, {3, 4}, g, {-7, 7}))
          .arg("other", random_tensor(d, {4}, g, {-3, 3, true}))
          .arg("rounding_mode", Attr(mode));
    });
    div.variant(std::string(mode) + " by number", [mode](DType d, Rng& g) {
      return Call()
          .arg("input", random_tensor(d, {5}, g, {-7, 7}))
          .arg("other", is_integral(d, false) ? int_number(-2) : number(-1.5))
          .arg("rounding_mode", Attr(mode));
    });
  }

  OpCases& pow = t.add("pow", minus(all_dtypes(), {DType::kBool}));
  pow.tolerance_ulps(8).reference(binary_ref(
      "input", "exponent",
      [](const Call&) {
        return Fns{[](const double* v) { return std::pow(v[0], v[1]); }, complex_pow};
      },
      true));
  // Integer exponents stay non-negative (a negative one is an error or 0).
  add_binary_variants(pow, {.input = "input", .other = "exponent", .lhs = Range{0, 3}, .rhs = Range{0, 3}});
  pow.variant("negative base", [](DType d, Rng& g) {
    return Call().arg("input", random_tensor(d, {6}, g, {-3, 0})).arg("exponent", int_number(3));
  });
  pow.variant("number base", [](DType d, Rng& g) {
    return Call().arg("input", number(2.0)).arg("exponent", random_tensor(d, {2, 3}, g, {0, 3}));
  });
  for (double e : {0.5, -0.5, -1.0, 2.0, 3.0, -2.0, 1.7}) {
    pow.variant("number exponent " + std::to_string(e), [e](DType d, Rng& g) {
      return Call().arg("input", random_tensor(d, {7}, g, {0.25, 3})).arg("exponent", number(e));
    });
  }

  for (const bool max : {true, false}) {
    OpCases& c = t.add(max ? "maximum" : "minimum", minus(all_dtypes(), complex_dtypes()));
    c.reference(binary_ref("input", "other", [max](const Call&) {
      auto f = [max](const double* v) {
        if (std::isnan(v[0]) || std::isnan(v[1])) return kNaN;
        return max ? std::max(v[0], v[1]) : std::min(v[0], v[1]);
      };
      return Fns{f, nullptr};
    }));
    add_binary_variants(c, {});
  }
}

// The documented cast rules (ops/convert.h): float -> integer truncates
// toward zero, NaN gives 0 and out-of-range values saturate; integer ->
// integer wraps; anything -> bool is != 0; complex -> real keeps the real
// part; floats round to nearest even.
void cast_into(const Tensor& out, int64_t i, DType from, C v) {
  const DType to = out.dtype();
  if (to == DType::kBool) return ref::store(out, i, v != C(0, 0) ? 1.0 : 0.0);
  if (!is_integral(to, false) || !(dtype_category(from) >= 2))
    return ref::store(out, i, is_complex(to) ? v : C(v.real()));
  double x = v.real();
  if (std::isnan(x)) return ref::store(out, i, 0.0);
  double lo = 0, hi = 0;
  switch (to) {
    case DType::kUInt8:
      lo = 0, hi = 255;
      break;
    case DType::kInt8:
      lo = -128, hi = 127;
      break;
    case DType::kInt16:
      lo = -32768, hi = 32767;
      break;
    case DType::kInt32:
      lo = -2147483648.0, hi = 2147483647.0;
      break;
    default:
      lo = -9223372036854775808.0, hi = 9223372036854775807.0;
  }
  x = std::trunc(x);
  if (x <= lo) {
    x = lo;
  } else if (x >= hi) {
    x = hi;
  }
  if (to == DType::kInt64 && x >= hi) {
    const int64_t m = std::numeric_limits<int64_t>::max();
    std::memcpy(static_cast<char*>(out.data()) + i * 8, &m, 8);
    return;
  }
  ref::store(out, i, x);
}

Outcome cast_ref(const Tensor& src, const TensorMeta& out) {
  Tensor r = Tensor::zeros_host(out.dtype, out.shape);
  for (int64_t i = 0; i < r.numel(); ++i) {
    const auto idx = ref::unravel(i, out.shape);
    // src broadcasts to out (copy_): right-aligned, size-1 dims repeat.
    int64_t j = 0, stride = 1;
    for (size_t k = 0; k < src.shape().size(); ++k) {
      const size_t ds = src.shape().size() - 1 - k, dout = out.shape.size() - 1 - k;
      j += (src.shape()[ds] == 1 ? 0 : idx[dout]) * stride;
      stride *= src.shape()[ds];
    }
    cast_into(r, i, src.dtype(), ref::cvalue(src, j));
  }
  return Outcome{{r}, {}};
}

void add_casts(CaseTable& t) {
  OpCases& to = t.add("to", all_dtypes());
  to.reference([](const Call& c, const Metas& m) { return cast_ref(c.tensor("input"), m[0]); });
  for (DType target : all_dtypes()) {
    to.variant("to " + std::string(dtype_name(target)), [target](DType d, Rng& g) {
      return Call().arg("input", random_tensor(d, {3, 4}, g)).arg("dtype", dtype_attr(target));
    });
  }
  to.variant("same dtype, copy", [](DType d, Rng& g) {
    return Call().arg("input", random_tensor(d, {5}, g)).arg("dtype", dtype_attr(d)).arg("copy", Attr(true));
  });
  for (DType target : {DType::kInt32, DType::kUInt8, DType::kInt64, DType::kFloat16, DType::kBool}) {
    to.variant(
        "special to " + std::string(dtype_name(target)),
        [target](DType d, Rng& g) {
          return Call().arg("input", special_tensor(d, {4, 6}, g)).arg("dtype", dtype_attr(target));
        },
        real_floating_dtypes());
  }
  to.variant("empty", [](DType d, Rng& g) {
    return Call().arg("input", random_tensor(d, {0, 3}, g)).arg("dtype", dtype_attr(DType::kFloat64));
  });

  OpCases& copy = t.add("copy_", all_dtypes());
  copy.reference([](const Call& c, const Metas& m) { return cast_ref(c.tensor("src"), m[0]); });
  copy.variant("same dtype", [](DType d, Rng& g) {
    return Call().arg("self", random_tensor(d, {3, 4}, g)).arg("src", random_tensor(d, {3, 4}, g));
  });
  copy.variant("broadcast from float64", [](DType d, Rng& g) {
    return Call().arg("self", random_tensor(d, {2, 3, 4}, g)).arg("src", random_tensor(DType::kFloat64, {3, 1}, g));
  });
  copy.variant("from complex", [](DType d, Rng& g) {
    return Call().arg("self", random_tensor(d, {4}, g)).arg("src", random_tensor(DType::kComplex64, {4}, g));
  });
  copy.variant("from int8", [](DType d, Rng& g) {
    return Call().arg("self", random_tensor(d, {2, 4}, g)).arg("src", random_tensor(DType::kInt8, {4}, g));
  });
  copy.variant("number",
               [](DType d, Rng& g) { return Call().arg("self", random_tensor(d, {3}, g)).arg("src", number(2.5)); });
  copy.variant("empty", [](DType d, Rng& g) {
    return Call().arg("self", random_tensor(d, {0, 2}, g)).arg("src", random_tensor(d, {2}, g));
  });
}

}  // namespace

void add_elementwise_cases(CaseTable& t) {
  add_unary(t);
  add_clamp(t);
  add_arith(t);
  add_casts(t);
}

}  // namespace tensord::conformance
