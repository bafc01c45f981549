// The op traits the SPMD planner reads instead of op names
// (scheduler/spmd_plan.cpp): every dist.* op a collective, which results
// are equal on every rank, which dim may differ across ranks, which ops
// write stored state. A new op registered without them is caught here.
#include <gtest/gtest.h>

#include <string>

#include "ops/dist/dist_ops.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

TEST(SpmdTraits, EveryCollectiveSaysHowItsResultsReplicate) {
  dist::link_dist_ops();
  const OpRegistry& r = OpRegistry::global();
  struct Want {
    const char* op;
    RankReplication replication;
    const char* varying_dim;  // the param, or nullptr
  };
  const Want want[] = {
      {"dist.all_reduce", RankReplication::kReplicated, nullptr},
      {"dist.all_gather", RankReplication::kReplicated, "dim"},
      {"dist.broadcast", RankReplication::kReplicated, nullptr},
      {"dist.reduce_scatter", RankReplication::kPerRank, nullptr},
      {"dist.all_to_all", RankReplication::kPerRank, nullptr},
      {"dist.barrier", RankReplication::kFollowsOperands, nullptr},
  };
  int collectives = 0;
  for (const OpDef* d : r.all()) {
    EXPECT_EQ(d->collective, d->name.starts_with("dist.")) << d->name;
    collectives += d->collective ? 1 : 0;
  }
  EXPECT_EQ(collectives, static_cast<int>(std::size(want))) << "a collective without a row here";
  for (const Want& w : want) {
    const OpDef* d = r.find(w.op);
    ASSERT_NE(d, nullptr) << w.op;
    EXPECT_EQ(d->replication, w.replication) << w.op;
    EXPECT_EQ(d->rank_varying_dim, w.varying_dim ? d->param_index(w.varying_dim) : -1) << w.op;
    EXPECT_FALSE(d->writes_stored_state) << w.op;
  }
}

TEST(SpmdTraits, RandomOpsReplicateOnlyWithASeedAndOptimizersWriteState) {
  const OpRegistry& r = OpRegistry::global();
  int optimizers = 0;
  for (const OpDef* d : r.all()) {
    const bool optim = d->name.starts_with("optim.");
    EXPECT_EQ(d->writes_stored_state, optim) << d->name;
    optimizers += optim ? 1 : 0;
    const bool random = d->name == "rand" || d->name == "randn";
    EXPECT_EQ(d->replication == RankReplication::kWhenSeeded, random) << d->name;
    if (random) {
      EXPECT_GE(d->param_index("seed"), 0) << d->name;
    }
  }
  EXPECT_GE(optimizers, 5) << "sgd, adam, adamw, adagrad, muon";
}

}  // namespace
}  // namespace tensord
