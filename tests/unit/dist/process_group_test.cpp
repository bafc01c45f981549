// The ProcessGroup seam without a transport: ops a backend lacks fail by
// name before a seq is taken; group names; the dim layout collectives pack by.
#include "ops/dist/process_group.h"

#include <gtest/gtest.h>

#include <functional>
#include <numeric>
#include <utility>

#include "ops/dist/dim_layout.h"
#include "ops/error.h"

namespace tensord::dist {
namespace {

Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error thrown";
  return Error(ErrorCode::kInternal, "no error");
}

Tensor two_floats() {
  Tensor t = Tensor::empty_host(DType::kFloat32, {2});
  t.data_ptr<float>()[0] = 1;
  t.data_ptr<float>()[1] = 2;
  return t;
}

// A backend with only barrier: the seam refuses the rest by name.
class BarrierOnly final : public ProcessGroup {
 public:
  BarrierOnly() : ProcessGroup(0, 1, {}) { start_worker(); }
  ~BarrierOnly() override { stop_worker(); }
  BarrierOnly(const BarrierOnly&) = delete;
  BarrierOnly& operator=(const BarrierOnly&) = delete;
  std::string_view backend_name() const override { return "fake"; }
  bool supports(CollectiveOp op) const override { return op == CollectiveOp::kBarrier; }
  bool supports_dtype(CollectiveOp, ReduceOp, DType) const override { return true; }

 protected:
  std::vector<Tensor> run(const CollectiveCall&, bool) override { return {}; }
};

TEST(ProcessGroupSeam, AnOpTheBackendLacksFailsByName) {
  BarrierOnly pg;
  Tensor x = two_floats();
  const std::pair<CollectiveOp, std::function<void()>> calls[] = {
      {CollectiveOp::kAllReduce, [&] { pg.all_reduce(x); }},
      {CollectiveOp::kAllGather, [&] { pg.all_gather(x); }},
      {CollectiveOp::kReduceScatter, [&] { pg.reduce_scatter(x); }},
      {CollectiveOp::kBroadcast, [&] { pg.broadcast(x); }},
      {CollectiveOp::kAllToAll, [&] { pg.all_to_all(x); }},
  };
  for (const auto& [op, call] : calls) {
    Error e = error_of(call);
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(e.message(), "backend fake does not support " + std::string(collective_op_name(op)));
  }
  EXPECT_EQ(pg.last_seq(), 0u);
  auto w = pg.barrier();
  w->wait(std::chrono::milliseconds(100));
  EXPECT_EQ(w->seq(), 1u);
  auto d = pg.recorder()->dump();
  ASSERT_EQ(d.entries.size(), 1u);
  EXPECT_EQ(d.entries[0].profiling_name, "fake:barrier");
  EXPECT_EQ(d.entries[0].state(), CollectiveState::kCompleted);
}

TEST(GroupName, WorldOrTheGlobalRanks) {
  EXPECT_EQ(group_name({0, 1, 2, 3}, 4), "world");
  EXPECT_EQ(group_name({1, 3}, 4), "ranks:1,3");
  EXPECT_EQ(group_name({0, 1}, 4), "ranks:0,1");
}

TEST(DimLayout, CopiesSlicesOutAndBackIn) {
  // [2, 4, 3] around dim 1: take slices 1..3 out and put them back.
  std::vector<int> src(24);
  std::iota(src.begin(), src.end(), 0);
  DimLayout l({2, 4, 3}, 1, sizeof(int));
  EXPECT_EQ(l.outer, 2);
  EXPECT_EQ(l.len, 4);
  EXPECT_EQ(l.inner, 3);
  std::vector<int> block(12);
  copy_slices_out(src.data(), l, 1, 2, block.data());
  EXPECT_EQ(block, (std::vector<int>{3, 4, 5, 6, 7, 8, 15, 16, 17, 18, 19, 20}));
  std::vector<int> back(24, -1);
  copy_slices_in(block.data(), l, 1, 2, back.data());
  EXPECT_EQ(back[3], 3);
  EXPECT_EQ(back[20], 20);
  EXPECT_EQ(back[0], -1);
}

}  // namespace
}  // namespace tensord::dist
