// RankWorkers' group factory (RankWorkersOptions::groups: how the CUDA
// server's ranks get NCCL groups): every local member joins through it,
// with its local rank, the run's key and one store; groups are kept while
// the key stays, joined anew under a new one; the flight recorders carry
// the factory's library version. The factory here makes Gloo groups, so
// it runs on the CPU; without a factory the ranks are Gloo's as before.
#include "scheduler/rank_workers.h"

#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <vector>

#include "ops/dist/flight_recorder.h"
#include "ops/dist/gloo_process_group.h"
#include "ops/tensor.h"

namespace tensord {
namespace {

struct Joined {
  int index;
  int size;
  int local_rank;
  std::string key_prefix;
  const void* store;
};

struct Factory {
  std::mutex mu;
  std::vector<Joined> joined;
  std::shared_ptr<gloo::transport::Device> device = dist::make_tcp_device("127.0.0.1");

  dist::GroupFactory make() {
    dist::GroupFactory f;
    f.backend = "gloo";
    f.version = "test-1.2.3";
    f.make = [this](int index, int size, dist::ProcessGroupOptions po, const dist::GroupJoin& join) {
      {
        std::lock_guard lk(mu);
        joined.push_back(Joined{index, size, join.local_rank, join.key_prefix, join.store.get()});
      }
      dist::GlooOptions go;
      go.store = join.store;
      go.key_prefix = join.key_prefix;
      go.device = device;
      go.rendezvous_timeout = join.rendezvous_timeout;
      return std::unique_ptr<dist::ProcessGroup>(
          std::make_unique<dist::GlooProcessGroup>(index, size, std::move(po), std::move(go)));
    };
    return f;
  }
};

// Every member all-reduces (its index + 1); the sums, by member.
std::vector<float> all_reduce(RankWorkers& w, const std::vector<int>& ranks, const std::string& key) {
  std::vector<float> out(ranks.size(), -1.f);
  auto errors = w.run(
      ranks, key,
      [&](size_t i, dist::ProcessGroup& g) {
        Tensor x = Tensor::empty_host(DType::kFloat32, {2});
        x.data_ptr<float>()[0] = static_cast<float>(i + 1);
        x.data_ptr<float>()[1] = 10.f;
        auto work = g.all_reduce(x);
        work->wait();
        out[i] = work->result().data_ptr<float>()[0];
      },
      nullptr);
  for (const auto& e : errors) EXPECT_FALSE(e);
  return out;
}

TEST(RankWorkers, AFactoryMakesEveryLocalMembersGroup) {
  Factory f;
  RankWorkersOptions o;
  o.ranks = 3;
  o.collective_timeout = std::chrono::milliseconds(10000);
  o.groups = f.make();
  RankWorkers w(o);
  EXPECT_EQ(w.recorder(0)->dump().comm_lib_version, "test-1.2.3");  // before any group exists

  EXPECT_EQ(all_reduce(w, {2, 0}, "k1"), std::vector<float>({3.f, 3.f}));
  {
    std::lock_guard lk(f.mu);
    ASSERT_EQ(f.joined.size(), 2u);
    std::set<int> locals;
    for (const Joined& j : f.joined) {
      EXPECT_EQ(j.size, 2);
      EXPECT_EQ(j.key_prefix, "k1");
      EXPECT_NE(j.store, nullptr);
      EXPECT_EQ(j.store, f.joined[0].store) << "the members of a lone server meet in one store";
      // Member 0 is rank 2: local rank 2 (its GPU on CUDA).
      EXPECT_EQ(j.local_rank, j.index == 0 ? 2 : 0);
      locals.insert(j.local_rank);
    }
    EXPECT_EQ(locals, (std::set<int>{0, 2}));
  }
  // The same key: the groups are kept.
  EXPECT_EQ(all_reduce(w, {2, 0}, "k1"), std::vector<float>({3.f, 3.f}));
  {
    std::lock_guard lk(f.mu);
    EXPECT_EQ(f.joined.size(), 2u);
  }
  // A new key (after a failure): joined anew.
  EXPECT_EQ(all_reduce(w, {2, 0}, "k2"), std::vector<float>({3.f, 3.f}));
  {
    std::lock_guard lk(f.mu);
    ASSERT_EQ(f.joined.size(), 4u);
    EXPECT_EQ(f.joined[3].key_prefix, "k2");
  }
  // The world: three members, sum 6.
  EXPECT_EQ(all_reduce(w, {0, 1, 2}, "w"), std::vector<float>({6.f, 6.f, 6.f}));
  const auto dump = w.recorder(1)->dump();
  ASSERT_FALSE(dump.entries.empty());
  EXPECT_EQ(dump.entries.back().profiling_name, "gloo:all_reduce");
}

TEST(RankWorkers, WithoutAFactoryTheRanksAreGloos) {
  RankWorkersOptions o;
  o.ranks = 2;
  o.collective_timeout = std::chrono::milliseconds(10000);
  RankWorkers w(o);
  EXPECT_EQ(w.recorder(0)->dump().comm_lib_version, dist::GlooProcessGroup::version());
  EXPECT_EQ(all_reduce(w, {0, 1}, "k"), std::vector<float>({3.f, 3.f}));
}

}  // namespace
}  // namespace tensord
