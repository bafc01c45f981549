// reshape permute transpose cat stack getitem.
#include <gtest/gtest.h>

#include <complex>
#include <numeric>

#include "op_call_util_shape.h"

namespace tensord::shape_test {
namespace {

// out[i...] = in[perm-mapped index], computed the slow way.
std::vector<float> permute_ref(const Tensor& in, const std::vector<int64_t>& perm) {
  const Shape& s = in.shape();
  Shape os;
  for (int64_t p : perm) os.push_back(s[static_cast<size_t>(p)]);
  const auto ist = contiguous_strides(s);
  std::vector<float> out(static_cast<size_t>(in.numel()));
  const float* src = in.data_ptr<float>();
  for (int64_t o = 0; o < in.numel(); ++o) {
    int64_t rem = o, off = 0;
    for (size_t d = os.size(); d-- > 0;) {
      off += (rem % os[d]) * ist[static_cast<size_t>(perm[d])];
      rem /= os[d];
    }
    out[static_cast<size_t>(o)] = src[off];
  }
  return out;
}

TEST(ShapeOpsReshape, InfersMinusOneAndIsAView) {
  Tensor x = iota_f32({2, 3, 4});
  Tensor y = run1("reshape", {x, Attr(std::vector<int64_t>{4, -1})});
  EXPECT_EQ(y.shape(), (Shape{4, 6}));
  EXPECT_EQ(y.data(), x.data());  // zero copy
  EXPECT_EQ(values<float>(y), values<float>(x));
  EXPECT_EQ(run1("reshape", {x, Attr(std::vector<int64_t>{-1})}).shape(), (Shape{24}));
  EXPECT_EQ(run1("reshape", {x, Attr(std::vector<int64_t>{2, -1, 3})}).shape(), (Shape{2, 4, 3}));
  EXPECT_EQ(run1("reshape", {iota_f32({1}), Attr(std::vector<int64_t>{})}).shape(), (Shape{}));
  EXPECT_EQ(run1("reshape", {iota_f32({}), Attr(std::vector<int64_t>{-1})}).shape(), (Shape{1}));
  EXPECT_EQ(run1("reshape", {iota_f32({0, 3}), Attr(std::vector<int64_t>{3, 0})}).shape(), (Shape{3, 0}));
  // A single int is a one-element list.
  EXPECT_EQ(run1("reshape", {x, Attr(int64_t{24})}).shape(), (Shape{24}));
}

TEST(ShapeOpsReshape, Errors) {
  Tensor x = iota_f32({2, 3});
  EXPECT_EQ(error_of("reshape", {x, Attr(std::vector<int64_t>{-1, -1})}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("reshape", {x, Attr(std::vector<int64_t>{4, -1})}), ErrorCode::kShapeMismatch);
  EXPECT_EQ(error_of("reshape", {x, Attr(std::vector<int64_t>{5})}), ErrorCode::kShapeMismatch);
  EXPECT_EQ(error_of("reshape", {x, Attr(std::vector<int64_t>{-2, -3})}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("reshape", {iota_f32({0, 2}), Attr(std::vector<int64_t>{0, -1})}), ErrorCode::kShapeMismatch);
  EXPECT_EQ(error_of("reshape", {x, Attr("a")}), ErrorCode::kInvalidArgument);
}

TEST(ShapeOpsPermute, MatchesReference) {
  Tensor x = iota_f32({2, 3, 4, 5});
  for (const auto& perm : std::vector<std::vector<int64_t>>{
           {0, 1, 2, 3}, {3, 2, 1, 0}, {1, 0, 3, 2}, {0, 2, 1, 3}, {2, 3, 0, 1}, {3, 0, 1, 2}}) {
    Tensor y = run1("permute", {x, Attr(perm)});
    Shape want;
    for (int64_t p : perm) want.push_back(x.shape()[static_cast<size_t>(p)]);
    EXPECT_EQ(y.shape(), want);
    EXPECT_EQ(values<float>(y), permute_ref(x, perm));
    EXPECT_NE(y.data(), x.data());  // a copy, never an alias
  }
  // Negative dims wrap.
  EXPECT_EQ(values<float>(run1("permute", {x, Attr(std::vector<int64_t>{-1, 0, 1, 2})})), permute_ref(x, {3, 0, 1, 2}));
  EXPECT_EQ(run1("permute", {iota_f32({}), Attr(std::vector<int64_t>{})}).shape(), (Shape{}));
}

TEST(ShapeOpsPermute, Errors) {
  Tensor x = iota_f32({2, 3, 4});
  EXPECT_EQ(error_of("permute", {x, Attr(std::vector<int64_t>{0, 1})}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("permute", {x, Attr(std::vector<int64_t>{0, 1, 1})}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("permute", {x, Attr(std::vector<int64_t>{0, 1, 3})}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("permute", {x, Attr(std::vector<int64_t>{0, -1, 2})}), ErrorCode::kInvalidArgument);
}

TEST(ShapeOpsTranspose, Values) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = run1("transpose", {x, Attr(0), Attr(1)});
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  Tensor z = iota_f32({2, 3, 4});
  EXPECT_EQ(values<float>(run1("transpose", {z, Attr(0), Attr(-1)})), permute_ref(z, {2, 1, 0}));
  EXPECT_EQ(values<float>(run1("transpose", {z, Attr(1), Attr(1)})), values<float>(z));
  EXPECT_EQ(run1("transpose", {iota_f32({}), Attr(0), Attr(-1)}).shape(), (Shape{}));
  EXPECT_EQ(error_of("transpose", {z, Attr(0), Attr(3)}), ErrorCode::kInvalidArgument);
}

TEST(ShapeOpsTranspose, LargeTiledAndParallelAllElementSizes) {
  ThreadPool pool(4);
  // Big enough for the tiled path and several parallel chunks, odd sizes to
  // hit partial tiles.
  Tensor x = iota_f32({3, 131, 257});
  Tensor y = run1("transpose", {x, Attr(1), Attr(2)}, {}, &pool);
  EXPECT_EQ(values<float>(y), permute_ref(x, {0, 2, 1}));
  EXPECT_EQ(values<float>(run1("permute", {x, Attr(std::vector<int64_t>{2, 1, 0})}, {}, &pool)),
            permute_ref(x, {2, 1, 0}));

  // 1-, 2-, 8- and 16-byte elements.
  std::vector<int8_t> b(6);
  std::iota(b.begin(), b.end(), int8_t{-3});
  EXPECT_EQ(values<int8_t>(run1("transpose", {make<int8_t>(DType::kInt8, {2, 3}, b), Attr(0), Attr(1)})),
            (std::vector<int8_t>{-3, 0, -2, 1, -1, 2}));
  EXPECT_EQ(
      values<uint16_t>(run1("transpose", {make<uint16_t>(DType::kBFloat16, {2, 2}, {1, 2, 3, 4}), Attr(0), Attr(1)})),
      (std::vector<uint16_t>{1, 3, 2, 4}));
  EXPECT_EQ(values<int64_t>(run1("transpose", {i64({3, 2}, {1, 2, 3, 4, 5, 6}), Attr(0), Attr(1)})),
            (std::vector<int64_t>{1, 3, 5, 2, 4, 6}));
  using C = std::complex<double>;
  std::vector<C> c = {{1, -1}, {2, -2}, {3, -3}, {4, -4}, {5, -5}, {6, -6}};
  EXPECT_EQ(values<C>(run1("transpose", {make<C>(DType::kComplex128, {2, 3}, c), Attr(0), Attr(1)})),
            (std::vector<C>{c[0], c[3], c[1], c[4], c[2], c[5]}));
}

TEST(ShapeOpsCat, AlongDims) {
  Tensor a = f32({2, 2}, {1, 2, 3, 4});
  Tensor b = f32({1, 2}, {5, 6});
  Tensor y = run1("cat", {std::vector<Tensor>{a, b}});
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  Tensor c = f32({2, 1}, {7, 8});
  Tensor z = run1("cat", {std::vector<Tensor>{a, c}, Attr(1)});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(values<float>(z), (std::vector<float>{1, 2, 7, 3, 4, 8}));
  EXPECT_EQ(values<float>(run1("cat", {std::vector<Tensor>{a, c}}, {{"dim", Attr(-1)}})), values<float>(z));
  // Zero-size parts and a single input.
  EXPECT_EQ(values<float>(run1("cat", {std::vector<Tensor>{a, iota_f32({0, 2})}})), values<float>(a));
  EXPECT_EQ(values<float>(run1("cat", {std::vector<Tensor>{a}})), values<float>(a));
  // Legacy 1-D empty tensors are skipped whatever the others' rank.
  EXPECT_EQ(values<float>(run1("cat", {std::vector<Tensor>{iota_f32({0}), a, iota_f32({0})}, Attr(1)})),
            values<float>(a));
}

TEST(ShapeOpsCat, LargeParallel) {
  ThreadPool pool(4);
  Tensor a = iota_f32({300, 70});
  Tensor b = iota_f32({300, 130});
  Tensor y = run1("cat", {std::vector<Tensor>{a, b}, Attr(1)}, {}, &pool);
  ASSERT_EQ(y.shape(), (Shape{300, 200}));
  const auto v = values<float>(y);
  for (int64_t i = 0; i < 300; ++i) {
    for (int64_t j = 0; j < 200; ++j) {
      const float want = j < 70 ? static_cast<float>(i * 70 + j) : static_cast<float>(i * 130 + (j - 70));
      ASSERT_EQ(v[static_cast<size_t>(i * 200 + j)], want) << i << "," << j;
    }
  }
}

TEST(ShapeOpsCat, PromotesDtypes) {
  Tensor a = make<int32_t>(DType::kInt32, {2}, {1, 2});
  Tensor b = f32({1}, {2.5f});
  Tensor y = run1("cat", {std::vector<Tensor>{a, b}});
  EXPECT_EQ(y.dtype(), DType::kFloat32);
  EXPECT_EQ(values<float>(y), (std::vector<float>{1, 2, 2.5f}));
  Tensor t = make<uint8_t>(DType::kBool, {2}, {1, 0});
  Tensor z = run1("cat", {std::vector<Tensor>{t, i64({1}, {7})}});
  EXPECT_EQ(z.dtype(), DType::kInt64);
  EXPECT_EQ(values<int64_t>(z), (std::vector<int64_t>{1, 0, 7}));
  Tensor w = run1("cat", {std::vector<Tensor>{make<double>(DType::kFloat64, {1}, {0.5}), a}});
  EXPECT_EQ(w.dtype(), DType::kFloat64);
  EXPECT_EQ(values<double>(w), (std::vector<double>{0.5, 1, 2}));
}

TEST(ShapeOpsCat, Errors) {
  Tensor a = iota_f32({2, 3});
  EXPECT_EQ(error_of("cat", {std::vector<Tensor>{a, iota_f32({2, 4})}}), ErrorCode::kShapeMismatch);
  EXPECT_EQ(error_of("cat", {std::vector<Tensor>{a, iota_f32({2, 3, 1})}}), ErrorCode::kShapeMismatch);
  EXPECT_EQ(error_of("cat", {std::vector<Tensor>{a, iota_f32({3})}}), ErrorCode::kShapeMismatch);
  EXPECT_EQ(error_of("cat", {std::vector<Tensor>{}}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("cat", {std::vector<Tensor>{a, a}, Attr(2)}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("cat", {std::vector<Tensor>{iota_f32({}), iota_f32({})}}), ErrorCode::kInvalidArgument);
}

TEST(ShapeOpsStack, NewDim) {
  Tensor a = f32({2}, {1, 2});
  Tensor b = f32({2}, {3, 4});
  Tensor y = run1("stack", {std::vector<Tensor>{a, b}});
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{1, 2, 3, 4}));
  Tensor z = run1("stack", {std::vector<Tensor>{a, b}, Attr(1)});
  EXPECT_EQ(z.shape(), (Shape{2, 2}));
  EXPECT_EQ(values<float>(z), (std::vector<float>{1, 3, 2, 4}));
  EXPECT_EQ(values<float>(run1("stack", {std::vector<Tensor>{a, b}, Attr(-1)})), values<float>(z));
  Tensor m = iota_f32({2, 3});
  Tensor s = run1("stack", {std::vector<Tensor>{m, m, m}, Attr(1)});
  EXPECT_EQ(s.shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(values<float>(s)[3], 0.0f);  // [0, 1, 0] = m[0, 0]
  EXPECT_EQ(values<float>(s)[9], 3.0f);  // [1, 0, 0] = m[1, 0]
  // Scalars stack into a vector; promotion as cat.
  Tensor v = run1("stack", {std::vector<Tensor>{i64({}, {3}), f32({}, {0.5f})}});
  EXPECT_EQ(v.dtype(), DType::kFloat32);
  EXPECT_EQ(values<float>(v), (std::vector<float>{3, 0.5f}));
}

TEST(ShapeOpsStack, Errors) {
  EXPECT_EQ(error_of("stack", {std::vector<Tensor>{iota_f32({2}), iota_f32({3})}}), ErrorCode::kShapeMismatch);
  EXPECT_EQ(error_of("stack", {std::vector<Tensor>{}}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("stack", {std::vector<Tensor>{iota_f32({2})}, Attr(2)}), ErrorCode::kInvalidArgument);
}

Tensor gi(const Tensor& x, Attr index) {
  return run1("getitem", {x, std::move(index)});
}

TEST(ShapeOpsGetitem, IntsAndSlices) {
  Tensor x = iota_f32({3, 4});
  Tensor r = gi(x, "1");
  EXPECT_EQ(r.shape(), (Shape{4}));
  EXPECT_EQ(values<float>(r), (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(values<float>(gi(x, "-1")), (std::vector<float>{8, 9, 10, 11}));
  Tensor e = gi(x, "1, -2");
  EXPECT_EQ(e.shape(), (Shape{}));
  EXPECT_EQ(values<float>(e), (std::vector<float>{6}));
  EXPECT_EQ(values<float>(gi(x, ":, 1")), (std::vector<float>{1, 5, 9}));
  Tensor s = gi(x, "0:2, 1:3");
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(values<float>(s), (std::vector<float>{1, 2, 5, 6}));
  EXPECT_EQ(values<float>(gi(x, "::2, ::3")), (std::vector<float>{0, 3, 8, 11}));
  EXPECT_EQ(values<float>(gi(x, "1, -3:")), (std::vector<float>{5, 6, 7}));
  EXPECT_EQ(values<float>(gi(x, "2, :-1:2")), (std::vector<float>{8, 10}));
  // Bounds clamp like Python; empty selections are fine.
  EXPECT_EQ(values<float>(gi(x, "0, -100:100")), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(gi(x, "5:").shape(), (Shape{0, 4}));
  EXPECT_EQ(gi(x, "2:1").shape(), (Shape{0, 4}));
  EXPECT_EQ(values<float>(gi(x, "0, 1::100")), (std::vector<float>{1}));
  EXPECT_EQ(values<float>(gi(x, "0, ::9223372036854775807")), (std::vector<float>{0}));
  // Whitespace, a trailing comma, the empty index.
  EXPECT_EQ(values<float>(gi(x, "  1 ,  1 : 3 : 1 ")), (std::vector<float>{5, 6}));
  EXPECT_EQ(values<float>(gi(x, "1,")), (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(values<float>(gi(x, "")), values<float>(x));
}

TEST(ShapeOpsGetitem, EllipsisAndNewAxis) {
  Tensor x = iota_f32({2, 3, 4});
  Tensor a = gi(x, "..., 1");
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(values<float>(a), (std::vector<float>{1, 5, 9, 13, 17, 21}));
  EXPECT_EQ(values<float>(gi(x, "1, ..., 2")), (std::vector<float>{14, 18, 22}));
  EXPECT_EQ(gi(x, "...").shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(gi(x, "0, 1, 2, ...").shape(), (Shape{}));
  EXPECT_EQ(gi(x, "None").shape(), (Shape{1, 2, 3, 4}));
  Tensor n = gi(x, "0, None, :, None, 1");
  EXPECT_EQ(n.shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(values<float>(n), (std::vector<float>{1, 5, 9}));
  EXPECT_EQ(gi(x, "..., None").shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(gi(iota_f32({}), "None").shape(), (Shape{1}));
  EXPECT_EQ(gi(iota_f32({}), "...").shape(), (Shape{}));
}

TEST(ShapeOpsGetitem, IntAttrs) {
  Tensor x = iota_f32({3, 4});
  EXPECT_EQ(values<float>(gi(x, Attr(int64_t{2}))), (std::vector<float>{8, 9, 10, 11}));
  EXPECT_EQ(values<float>(gi(x, Attr(std::vector<int64_t>{1, -1}))), (std::vector<float>{7}));
}

TEST(ShapeOpsGetitem, LargeStridedParallel) {
  ThreadPool pool(4);
  Tensor x = iota_f32({64, 50, 40});
  Tensor y = run1("getitem", {x, Attr("1::3, ..., 5:35:2")}, {}, &pool);
  ASSERT_EQ(y.shape(), (Shape{21, 50, 15}));
  const auto v = values<float>(y);
  for (int64_t i = 0; i < 21; ++i) {
    for (int64_t j = 0; j < 50; ++j) {
      for (int64_t k = 0; k < 15; ++k) {
        ASSERT_EQ(v[static_cast<size_t>((i * 50 + j) * 15 + k)],
                  static_cast<float>(((1 + 3 * i) * 50 + j) * 40 + 5 + 2 * k));
      }
    }
  }
}

TEST(ShapeOpsGetitem, Errors) {
  Tensor x = iota_f32({3, 4});
  for (const char* bad : {"3", "-4", "0, 4", "::0", "::-1", "0, 0, 0", "..., ...", "a", "1:2:3:4", "1,,2", "1.5", ",",
                          "0x1", "99999999999999999999"}) {
    EXPECT_EQ(error_of("getitem", {x, Attr(bad)}), ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(error_of("getitem", {x, Attr(int64_t{3})}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("getitem", {x, Attr(1.5)}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of("getitem", {iota_f32({}), Attr("0")}), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace tensord::shape_test
