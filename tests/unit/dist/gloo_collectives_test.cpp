// Every collective and reduction op of GlooProcessGroup with R = 2, 3, 4
// ranks (threads over loopback) against references computed here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <numeric>

#include "dist_test_util.h"

namespace tensord::dist {
namespace {

using namespace testing;

constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProd};

// Rank r's element i: small values, exact in every dtype (products too).
template <class T>
T value(int r, int64_t i) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>((i % 7) * 0.5 + r + 1);
  } else {
    return static_cast<T>((i % 7) - 2 + r);
  }
}

template <class T>
std::vector<T> rank_values(int r, int64_t n, int64_t offset = 0) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = value<T>(r, i + offset);
  return v;
}

template <class T>
T reduce_ref(ReduceOp op, int R, int64_t i) {
  T acc = value<T>(0, i);
  for (int r = 1; r < R; ++r) {
    const T v = value<T>(r, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc = static_cast<T>(acc + v);
        break;
      case ReduceOp::kProd:
        acc = static_cast<T>(acc * v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
    }
  }
  if (op == ReduceOp::kAvg) acc = static_cast<T>(acc / static_cast<T>(R));
  return acc;
}

template <class T>
void check_all_reduce(Groups& g, int R, ReduceOp op, int64_t n) {
  on_ranks(R, [&](int r) {
    Tensor x = make<T>({n}, rank_values<T>(r, n));
    auto w = g[r].all_reduce(x, op);
    w->wait();
    auto got = values<T>(w->result());
    ASSERT_EQ(got.size(), static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[static_cast<size_t>(i)], reduce_ref<T>(op, R, i))
          << "R=" << R << " op=" << reduce_op_name(op) << " dtype=" << dtype_name(dtype_of<T>()) << " i=" << i;
    }
    EXPECT_EQ(values<T>(x), rank_values<T>(r, n)) << "the input is left as it was";
  });
}

class GlooRanks : public ::testing::TestWithParam<int> {};

TEST_P(GlooRanks, AllReduceEveryOpAndDtype) {
  const int R = GetParam();
  Groups g = make_groups(R);
  for (ReduceOp op : kOps) {
    check_all_reduce<float>(g, R, op, 37);
    check_all_reduce<double>(g, R, op, 37);
    check_all_reduce<int32_t>(g, R, op, 37);
    check_all_reduce<int64_t>(g, R, op, 37);
  }
  // Past Gloo's 1 MiB segment, and empty.
  check_all_reduce<float>(g, R, ReduceOp::kSum, 300001);
  check_all_reduce<float>(g, R, ReduceOp::kMax, 0);
}

// Rank r's tensor for gathers: `rows` along dim of a [a, b] matrix.
Shape shape_along(int64_t dim, int64_t extent, int64_t other) {
  return dim == 0 ? Shape{extent, other} : Shape{other, extent};
}

TEST_P(GlooRanks, AllGatherEvenAndUnevenAlongEitherDim) {
  const int R = GetParam();
  Groups g = make_groups(R);
  for (bool uneven : {false, true}) {
    for (int64_t dim : {0, 1}) {
      const auto extent = [&](int r) -> int64_t { return uneven ? r + 1 : 2; };
      on_ranks(R, [&](int r) {
        const int64_t other = 3;
        Shape s = shape_along(dim, extent(r), other);
        const int64_t n = extent(r) * other;
        Tensor x = make<int64_t>(s, rank_values<int64_t>(r, n, 100 * r));
        auto w = g[r].all_gather(x, dim);
        w->wait();
        const Tensor& out = w->result();
        int64_t total = 0;
        for (int q = 0; q < R; ++q) total += extent(q);
        ASSERT_EQ(out.shape(), shape_along(dim, total, other));
        // Reference: concatenate along dim, element by element.
        auto got = values<int64_t>(out);
        int64_t start = 0;
        for (int q = 0; q < R; ++q) {
          auto xq = rank_values<int64_t>(q, extent(q) * other, 100 * q);
          for (int64_t j = 0; j < extent(q); ++j) {
            for (int64_t k = 0; k < other; ++k) {
              const int64_t src = dim == 0 ? j * other + k : k * extent(q) + j;
              const int64_t dst = dim == 0 ? (start + j) * other + k : k * total + start + j;
              ASSERT_EQ(got[static_cast<size_t>(dst)], xq[static_cast<size_t>(src)])
                  << "R=" << R << " dim=" << dim << " uneven=" << uneven;
            }
          }
          start += extent(q);
        }
      });
    }
  }
}

TEST_P(GlooRanks, ReduceScatterEveryOpAlongEitherDim) {
  const int R = GetParam();
  Groups g = make_groups(R);
  for (ReduceOp op : kOps) {
    for (int64_t dim : {0, 1}) {
      on_ranks(R, [&](int r) {
        const int64_t part = 2, other = 3;
        Shape s = shape_along(dim, part * R, other);
        const int64_t n = part * R * other;
        Tensor x = make<double>(s, rank_values<double>(r, n));
        auto w = g[r].reduce_scatter(x, op, dim);
        w->wait();
        const Tensor& out = w->result();
        ASSERT_EQ(out.shape(), shape_along(dim, part, other));
        auto got = values<double>(out);
        for (int64_t j = 0; j < part; ++j) {
          for (int64_t k = 0; k < other; ++k) {
            const int64_t row = r * part + j;
            const int64_t src = dim == 0 ? row * other + k : k * part * R + row;
            const int64_t dst = dim == 0 ? j * other + k : k * part + j;
            ASSERT_EQ(got[static_cast<size_t>(dst)], reduce_ref<double>(op, R, src))
                << "R=" << R << " op=" << reduce_op_name(op) << " dim=" << dim;
          }
        }
      });
    }
  }
  // Integers too (avg truncates).
  on_ranks(R, [&](int r) {
    Tensor x = make<int32_t>({2 * R}, rank_values<int32_t>(r, 2 * R));
    auto w = g[r].reduce_scatter(x, ReduceOp::kAvg);
    w->wait();
    auto got = values<int32_t>(w->result());
    for (int64_t j = 0; j < 2; ++j)
      EXPECT_EQ(got[static_cast<size_t>(j)], reduce_ref<int32_t>(ReduceOp::kAvg, R, 2 * r + j));
  });
}

TEST_P(GlooRanks, BroadcastFromEveryRank) {
  const int R = GetParam();
  Groups g = make_groups(R);
  for (int src = 0; src < R; ++src) {
    on_ranks(R, [&](int r) {
      Tensor x = make<float>({2, 5}, r == src ? rank_values<float>(src, 10) : std::vector<float>(10, -1.f));
      auto w = g[r].broadcast(x, src);
      w->wait();
      EXPECT_EQ(w->result().shape(), (Shape{2, 5}));
      EXPECT_EQ(values<float>(w->result()), rank_values<float>(src, 10)) << "R=" << R << " src=" << src;
    });
  }
}

// What rank `to` receives from rank `from` in the all_to_all tests: the
// values encode both.
int64_t a2a_value(int from, int to, int64_t j, int64_t k) {
  return from * 1000 + to * 100 + j * 10 + k;
}

TEST_P(GlooRanks, AllToAllEvenUnevenAlongEitherDim) {
  const int R = GetParam();
  Groups g = make_groups(R);
  const int64_t other = 3;
  for (bool uneven : {false, true}) {
    for (int64_t dim : {0, 1}) {
      // Rank `from` sends split(from, to) slices to rank `to`.
      const auto split = [&](int from, int to) -> int64_t { return uneven ? (from + 2 * to) % 3 + (to == 0) : 2; };
      on_ranks(R, [&](int r) {
        std::vector<int64_t> splits;
        int64_t len = 0;
        for (int to = 0; to < R; ++to) {
          splits.push_back(split(r, to));
          len += splits.back();
        }
        Shape s = shape_along(dim, len, other);
        std::vector<int64_t> v(static_cast<size_t>(len * other));
        int64_t start = 0;
        for (int to = 0; to < R; ++to) {
          for (int64_t j = 0; j < splits[static_cast<size_t>(to)]; ++j) {
            for (int64_t k = 0; k < other; ++k) {
              const int64_t i = dim == 0 ? (start + j) * other + k : k * len + start + j;
              v[static_cast<size_t>(i)] = a2a_value(r, to, j, k);
            }
          }
          start += splits[static_cast<size_t>(to)];
        }
        Tensor x = make<int64_t>(s, v);
        auto w = uneven ? g[r].all_to_all(x, dim, splits) : g[r].all_to_all(x, dim);
        w->wait();
        int64_t total = 0;
        for (int from = 0; from < R; ++from) total += split(from, r);
        ASSERT_EQ(w->result().shape(), shape_along(dim, total, other));
        auto got = values<int64_t>(w->result());
        start = 0;
        for (int from = 0; from < R; ++from) {
          for (int64_t j = 0; j < split(from, r); ++j) {
            for (int64_t k = 0; k < other; ++k) {
              const int64_t i = dim == 0 ? (start + j) * other + k : k * total + start + j;
              ASSERT_EQ(got[static_cast<size_t>(i)], a2a_value(from, r, j, k))
                  << "R=" << R << " dim=" << dim << " uneven=" << uneven << " from=" << from;
            }
          }
          start += split(from, r);
        }
      });
    }
  }
}

TEST_P(GlooRanks, BarrierWaitsForTheLastRank) {
  const int R = GetParam();
  Groups g = make_groups(R);
  std::vector<std::chrono::steady_clock::time_point> done(static_cast<size_t>(R));
  std::chrono::steady_clock::time_point last_arrival;
  on_ranks(R, [&](int r) {
    if (r == R - 1) {
      std::this_thread::sleep_for(150ms);
      last_arrival = std::chrono::steady_clock::now();
    }
    auto w = g[r].barrier();
    w->wait();
    EXPECT_TRUE(w->outputs().empty());
    done[static_cast<size_t>(r)] = std::chrono::steady_clock::now();
  });
  for (int r = 0; r < R; ++r) EXPECT_GE(done[static_cast<size_t>(r)], last_arrival) << "rank " << r;
}

TEST_P(GlooRanks, SeqIsEqualAcrossRanksAndIncreasing) {
  const int R = GetParam();
  Groups g = make_groups(R);
  std::vector<std::vector<uint64_t>> seqs(static_cast<size_t>(R));
  on_ranks(R, [&](int r) {
    Tensor x = make<float>({2 * R}, rank_values<float>(r, 2 * R));
    std::vector<std::shared_ptr<Work>> ws;
    // Issued back to back, waited afterwards: the seq is taken at the call.
    ws.push_back(g[r].all_reduce(x));
    ws.push_back(g[r].broadcast(x, R - 1));
    ws.push_back(g[r].all_gather(x));
    ws.push_back(g[r].reduce_scatter(x, ReduceOp::kMax));
    ws.push_back(g[r].all_to_all(x));
    ws.push_back(g[r].barrier());
    for (auto& w : ws) {
      w->wait();
      seqs[static_cast<size_t>(r)].push_back(w->seq());
    }
    EXPECT_EQ(g[r].last_seq(), 6u);
  });
  EXPECT_EQ(seqs[0], (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
  for (int r = 1; r < R; ++r) EXPECT_EQ(seqs[static_cast<size_t>(r)], seqs[0]) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(R, GlooRanks, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& i) { return std::to_string(i.param); });

TEST(GlooStores, RanksMeetThroughAFileStore) {
  char tmpl[] = "/tmp/tensord-dist-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  // A store per rank over one directory, as two processes would open it.
  Groups g = make_groups(2, 5000ms, 2048, nullptr, [&](int) { return make_file_store(tmpl); });
  on_ranks(2, [&](int r) {
    auto w = g[r].all_reduce(make<int32_t>({3}, {r, r, r}));
    w->wait();
    EXPECT_EQ(values<int32_t>(w->result()), (std::vector<int32_t>{1, 1, 1}));
  });
  g.pgs.clear();
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace tensord::dist
