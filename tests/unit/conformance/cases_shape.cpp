// Shape ops: reshape permute transpose cat stack getitem. References move
// elements by index arithmetic written here; cat and stack promote.
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "tests/unit/conformance/variants.h"

namespace tensord::conformance {
namespace {

using Idx = std::vector<int64_t>;
using Dims = std::vector<int64_t>;

// out[o] = in[src(o)] (bytes; same dtype).
Tensor gather(const Tensor& in, const TensorMeta& out, const std::function<Idx(const Idx&)>& src) {
  Tensor r = Tensor::zeros_host(out.dtype, out.shape);
  EXPECT_EQ(in.dtype(), out.dtype);
  const size_t esz = dtype_size(in.dtype());
  const auto st = ref::strides_of(in.shape());
  for (int64_t i = 0; i < r.numel(); ++i) {
    const Idx s = src(ref::unravel(i, out.shape));
    int64_t j = 0;
    for (size_t k = 0; k < s.size(); ++k) j += s[k] * st[k];
    std::memcpy(static_cast<char*>(r.data()) + i * esz, static_cast<const char*>(in.data()) + j * esz, esz);
  }
  return r;
}

int64_t wrap(int64_t d, size_t rank) {
  return d < 0 ? d + static_cast<int64_t>(rank) : d;
}

void add_reshape(CaseTable& t) {
  OpCases& c = t.add("reshape", all_dtypes());
  c.reference([](const Call& call, const Metas& m) {
    const Tensor& x = call.tensor("input");
    Tensor r = Tensor::zeros_host(m[0].dtype, m[0].shape);
    EXPECT_EQ(r.nbytes(), x.nbytes());
    if (r.nbytes() == x.nbytes() && r.nbytes()) std::memcpy(r.data(), x.data(), r.nbytes());
    return Outcome{{r}, {}};
  });
  const std::pair<Shape, Dims> shapes[] = {{{2, 3, 4}, {4, 6}}, {{2, 3, 4}, {-1, 2}}, {{1}, {}},
                                           {{}, {1, 1}},        {{0, 3}, {3, 0}},     {{6}, {2, -1, 3}}};
  for (const auto& [from, to] : shapes) {
    c.variant(shape_str(from) + " to " + shape_str(to), [from, to](DType d, Rng& g) {
      return Call().arg("input", random_tensor(d, from, g)).arg("shape", Attr(to));
    });
  }
}

void add_permute_transpose(CaseTable& t) {
  OpCases& p = t.add("permute", all_dtypes());
  p.reference([](const Call& call, const Metas& m) {
    const Tensor& x = call.tensor("input");
    const Dims dims = call.attr("dims").to_int_list("dims");
    return Outcome{{gather(x, m[0],
                           [&](const Idx& o) {
                             Idx s(o.size());
                             for (size_t k = 0; k < o.size(); ++k)
                               s[static_cast<size_t>(wrap(dims[k], o.size()))] = o[k];
                             return s;
                           })},
                   {}};
  });
  const std::pair<Shape, Dims> perms[] = {
      {{2, 3, 4}, {2, 0, 1}}, {{2, 3, 4}, {-1, 0, 1}}, {{}, {}}, {{0, 2, 3}, {1, 2, 0}}, {{4, 5}, {1, 0}}};
  for (const auto& [s, dims] : perms) {
    p.variant(shape_str(s) + " by " + shape_str(dims), [s, dims](DType d, Rng& g) {
      return Call().arg("input", random_tensor(d, s, g)).arg("dims", Attr(dims));
    });
  }
  p.variant(
      "large",
      [](DType d, Rng& g) {
        return Call().arg("input", random_tensor(d, {40, 50, 30}, g)).arg("dims", Attr(Dims{2, 0, 1}));
      },
      large_dtypes());

  OpCases& tr = t.add("transpose", all_dtypes());
  tr.reference([](const Call& call, const Metas& m) {
    const Tensor& x = call.tensor("input");
    const size_t rank = x.shape().size();
    const auto d0 = static_cast<size_t>(wrap(call.attr("dim0").to_int("dim0"), rank));
    const auto d1 = static_cast<size_t>(wrap(call.attr("dim1").to_int("dim1"), rank));
    return Outcome{{gather(x, m[0],
                           [&](const Idx& o) {
                             Idx s = o;
                             std::swap(s[d0], s[d1]);
                             return s;
                           })},
                   {}};
  });
  const std::tuple<Shape, int64_t, int64_t> swaps[] = {
      {{2, 3, 4}, 0, 2}, {{2, 3, 4}, -1, -2}, {{5}, 0, 0}, {{0, 3}, 0, 1}, {{3, 1, 2}, 1, 1}};
  for (const auto& [s, a, b] : swaps) {
    tr.variant(shape_str(s) + " " + std::to_string(a) + "," + std::to_string(b), [s, a, b](DType d, Rng& g) {
      return Call().arg("input", random_tensor(d, s, g)).arg("dim0", Attr(int64_t{a})).arg("dim1", Attr(int64_t{b}));
    });
  }
}

// cat/stack reference: each output element from the input it lies in,
// converted to the result dtype.
Outcome join_ref(const Call& call, const TensorMeta& out, bool stack) {
  const auto& in = std::get<TensorList>(*call.find("tensors")).tensors;
  const Attr& da = call.attr("dim");
  const int64_t dim = wrap(da.is_none() ? 0 : da.to_int("dim"), out.shape.size());
  Tensor r = Tensor::zeros_host(out.dtype, out.shape);
  for (int64_t i = 0; i < r.numel(); ++i) {
    Idx o = ref::unravel(i, out.shape);
    size_t k = 0;
    int64_t pos = o[static_cast<size_t>(dim)];
    Idx s = o;
    if (stack) {
      k = static_cast<size_t>(pos);
      s.erase(s.begin() + dim);
    } else {
      // Skip 1-D empty tensors, which cat ignores, and walk the sizes.
      while (k < in.size() && (in[k].shape() == Shape{0} || pos >= in[k].shape()[static_cast<size_t>(dim)])) {
        if (in[k].shape() != Shape{0}) pos -= in[k].shape()[static_cast<size_t>(dim)];
        ++k;
      }
      s[static_cast<size_t>(dim)] = pos;
    }
    const auto st = ref::strides_of(in[k].shape());
    int64_t j = 0;
    for (size_t q = 0; q < s.size(); ++q) j += s[q] * st[q];
    ref::store(r, i, ref::cvalue(in[k], j));
  }
  return Outcome{{r}, {}};
}

Call list_call(std::vector<Tensor> ts, int64_t dim) {
  TensorList l;
  l.tensors = std::move(ts);
  return Call().arg("tensors", std::move(l)).arg("dim", Attr(dim));
}

void add_cat_stack(CaseTable& t) {
  OpCases& cat = t.add("cat", all_dtypes());
  cat.reference([](const Call& c, const Metas& m) { return join_ref(c, m[0], false); });
  cat.variant("dim 0", [](DType d, Rng& g) {
    return list_call({random_tensor(d, {2, 3}, g), random_tensor(d, {1, 3}, g), random_tensor(d, {4, 3}, g)}, 0);
  });
  cat.variant("dim -1", [](DType d, Rng& g) {
    return list_call({random_tensor(d, {2, 2, 1}, g), random_tensor(d, {2, 2, 3}, g)}, -1);
  });
  cat.variant("one tensor", [](DType d, Rng& g) { return list_call({random_tensor(d, {3, 2}, g)}, 1); });
  cat.variant("with empty", [](DType d, Rng& g) {
    return list_call({random_tensor(d, {0, 3}, g), random_tensor(d, {2, 3}, g), random_tensor(d, {0}, g)}, 0);
  });
  cat.variant("mixed dtypes", [](DType d, Rng& g) {
    return list_call({random_tensor(d, {2, 2}, g), random_tensor(DType::kInt32, {1, 2}, g)}, 0);
  });
  cat.variant(
      "large",
      [](DType d, Rng& g) {
        return list_call({random_tensor(d, {200, 300}, g), random_tensor(d, {200, 100}, g)}, 1);
      },
      large_dtypes());

  OpCases& stack = t.add("stack", all_dtypes());
  stack.reference([](const Call& c, const Metas& m) { return join_ref(c, m[0], true); });
  stack.variant("dim 0", [](DType d, Rng& g) {
    return list_call({random_tensor(d, {2, 3}, g), random_tensor(d, {2, 3}, g), random_tensor(d, {2, 3}, g)}, 0);
  });
  stack.variant("dim 2", [](DType d, Rng& g) {
    return list_call({random_tensor(d, {2, 3}, g), random_tensor(d, {2, 3}, g)}, 2);
  });
  stack.variant("dim -2", [](DType d, Rng& g) {
    return list_call({random_tensor(d, {4}, g), random_tensor(d, {4}, g)}, -2);
  });
  stack.variant("0-d", [](DType d, Rng& g) {
    return list_call({random_tensor(d, {}, g), random_tensor(d, {}, g), random_tensor(d, {}, g)}, 0);
  });
  stack.variant("empty", [](DType d, Rng& g) {
    return list_call({random_tensor(d, {0, 2}, g), random_tensor(d, {0, 2}, g)}, 1);
  });
  stack.variant("mixed dtypes", [](DType d, Rng& g) {
    return list_call({random_tensor(d, {3}, g), random_tensor(DType::kFloat64, {3}, g)}, 0);
  });
}

void add_getitem(CaseTable& t) {
  OpCases& c = t.add("getitem", all_dtypes());
  struct Index {
    std::string name;
    Shape shape;
    Attr index;
    std::function<Idx(const Idx&)> src;
    DTypes only;
  };
  const Index indices[] = {
      {"row",
       {3, 4},
       Attr("1"),
       [](const Idx& o) {
         return Idx{1, o[0]};
       },
       {}},
      {"negative and slice",
       {3, 4},
       Attr("-1, 1:3"),
       [](const Idx& o) {
         return Idx{2, 1 + o[0]};
       },
       {}},
      {"steps",
       {5, 6},
       Attr("::2, 1::2"),
       [](const Idx& o) {
         return Idx{2 * o[0], 1 + 2 * o[1]};
       },
       {}},
      {"ellipsis",
       {2, 3, 4},
       Attr("..., 1"),
       [](const Idx& o) {
         return Idx{o[0], o[1], 1};
       },
       {}},
      {"new axis",
       {3, 4},
       Attr("None, 0, :"),
       [](const Idx& o) {
         return Idx{0, o[1]};
       },
       {}},
      {"int list",
       {3, 4},
       Attr(Idx{1, -1}),
       [](const Idx&) {
         return Idx{1, 3};
       },
       {}},
      {"empty slice", {3, 4}, Attr("2:1"), [](const Idx& o) { return o; }, {}},
      {"large",
       {64, 50, 40},
       Attr("1::3, ..., 5:35:2"),
       [](const Idx& o) {
         return Idx{1 + 3 * o[0], o[1], 5 + 2 * o[2]};
       },
       large_dtypes()},
  };
  for (const Index& ix : indices) {
    auto src = ix.src;
    c.variant_with_ref(
        ix.name,
        [ix](DType d, Rng& g) { return Call().arg("input", random_tensor(d, ix.shape, g)).arg("index", ix.index); },
        [src](const Call& call, const Metas& m) {
          return Outcome{{gather(call.tensor("input"), m[0], src)}, {}};
        },
        ix.only);
  }
}

}  // namespace

void add_shape_cases(CaseTable& t) {
  add_reshape(t);
  add_permute_transpose(t);
  add_cat_stack(t);
  add_getitem(t);
}

}  // namespace tensord::conformance
