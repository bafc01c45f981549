// SPMD graphs on the CUDA backend (API.md 8: "Collectives work ... inside
// captured graphs (on CUDA, NCCL kernels are captured into the graph)"):
// each member of a graph captured with "ranks" is a device graph on its
// rank's GPU with its NCCL collectives captured (GraphService::
// capture_on_ranks), its replays give the numbers the program gives when run
// directly, every replay takes the group's next seqs and completes their
// flight-recorder entries, a replaced group (after a failed job) captures
// again, and a program that cannot be captured (a barrier) replays through
// the executor. Label "gpu": without a device or NCCL the tests skip saying
// why; the two-rank tests skip on one GPU ("needs 2 GPUs").
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "graphs/device_graph.h"
#include "graphs/graph_store.h"
#include "ops/backend.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/dist/dist_ops.h"
#include "ops/dist/flight_recorder.h"
#include "ops/error.h"
#include "scheduler/engine.h"
#include "scheduler/graph_service.h"
#include "scheduler/job.h"
#include "scheduler/rank_workers.h"
#include "tests/unit/graphs/program_builder.h"
#include "tests/unit/scheduler/one_tenant_config.h"
#include "tests/unit/scheduler/run_job.h"
#if defined(TENSORD_HAVE_NCCL)
#include "ops/dist/nccl/nccl_process_group.h"
#endif

namespace tensord {
namespace {
using namespace testing_util;

constexpr int64_t kN = 4;  // elements per rank

// y = 2x (a CUDA kernel the collectives must wait for), then all_reduce,
// all_gather and broadcast of y; `barrier` adds a dist.barrier (no result:
// the program is not capturable).
Program program(bool barrier = false) {
  dist::link_dist_ops();
  Program p;
  p.nodes = {
      node("m", "mul", {ref("x"), lit(Attr(2.0))}, {"y"}),
      node("r", "dist.all_reduce", {ref("y")}, {"sum"}),
      node("g", "dist.all_gather", {ref("y")}, {"gathered"}),
      node("b", "dist.broadcast", {ref("y")}, {"from0"}),
  };
  if (barrier) p.nodes.push_back(node("w", "dist.barrier", std::vector<ArgExpr>{}, std::vector<std::string>{}));
  p.outputs = {"sum", "gathered", "from0", "y"};
  return p;
}

// Rank r's x: small integers (sums exact in any order), different per rank
// and per `round`.
std::vector<Tensor> inputs(int R, int round) {
  std::vector<Tensor> v;
  for (int r = 0; r < R; ++r) {
    Tensor t = Tensor::empty_host(DType::kFloat32, {kN});
    for (int64_t i = 0; i < kN; ++i) t.data_ptr<float>()[i] = static_cast<float>(10 * r + i + round);
    v.push_back(t);
  }
  return v;
}

SpmdRequest spmd_inputs(int R, int round) {
  SpmdRequest s;
  s.count = R;
  s.inputs["x"].per_rank = inputs(R, round);
  return s;
}

GraphCaptureRequest capture_request(int R, bool barrier = false) {
  GraphCaptureRequest cr;
  cr.program = program(barrier);
  cr.spmd.emplace();
  cr.spmd->count = R;
  cr.per_rank["x"] = std::vector<TensorMeta>(static_cast<size_t>(R), TensorMeta{DType::kFloat32, {kN}});
  return cr;
}

std::vector<float> values(const Tensor& t) {
  Tensor h = t.on_host() ? t : t.to_host();
  std::vector<float> v(static_cast<size_t>(h.numel()));
  if (!v.empty()) std::memcpy(v.data(), h.data(), v.size() * sizeof(float));
  return v;
}

void expect_same(const JobResult& got, const JobResult& want, const std::string& what) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size()) << what;
  for (size_t k = 0; k < want.outputs.size(); ++k) {
    const std::string& name = want.outputs[k].first;
    EXPECT_EQ(got.outputs[k].first, name) << what;
    EXPECT_EQ(got.outputs[k].second.meta().str(), want.outputs[k].second.meta().str()) << what << ": " << name;
    EXPECT_EQ(values(got.outputs[k].second), values(want.outputs[k].second))
        << what << ": output " << name << " differs from the program run directly";
    ASSERT_EQ(got.per_rank.at(k).size(), want.per_rank.at(k).size()) << what << ": " << name;
    for (size_t i = 0; i < want.per_rank[k].size(); ++i) {
      EXPECT_EQ(values(got.per_rank[k][i]), values(want.per_rank[k][i]))
          << what << ": output " << name << " of rank " << i << " differs from the program run directly";
    }
  }
}

struct RankLog {
  int64_t last_enqueued = 0;   // the group's last seq in the rank's flight recorder (0: none)
  int64_t last_completed = 0;  // its last completed seq (0: none)
  int completed_nccl = 0;      // completed nccl:* entries
};

RankLog rank_log(Engine& e, int r, const std::string& group = "world") {
  RankLog l;
  const auto dump = e.ranks().recorder(r)->dump();
  for (const auto& g : dump.groups) {
    if (g.name == group) {
      l.last_enqueued = std::max<int64_t>(0, g.last_enqueued_collective);
      l.last_completed = std::max<int64_t>(0, g.last_completed_collective);
    }
  }
  for (const auto& en : dump.entries) {
    if (en.pg_name == group && en.profiling_name.rfind("nccl:", 0) == 0 &&
        en.state() == dist::CollectiveState::kCompleted) {
      ++l.completed_nccl;
    }
  }
  return l;
}

#if defined(TENSORD_HAVE_NCCL)
class SpmdGraphNcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!make_cuda_backend())
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports " << cuda_device_count() << ")";
    gpus_ = cuda_device_count();
  }
  void start(int ranks) {
    std::unique_ptr<Backend> b = make_backend("cuda", 1);
    ASSERT_TRUE(b) << "the CUDA backend did not start";
    EngineOptions o;
    o.ranks = ranks;
    o.collective_timeout = std::chrono::milliseconds(20000);
    o.rank_groups = dist::nccl_group_factory(b.get());
    engine_ = std::make_unique<Engine>(std::move(b), one_tenant_config(), o);
    graphs_ = std::make_unique<GraphService>(*engine_);
    tenant_ = std::make_unique<Tenant>(one_tenant_config().tenants[0]);
  }
  void TearDown() override {
    graphs_.reset();
    engine_.reset();
  }

  std::shared_ptr<CapturedGraph> capture(GraphCaptureRequest cr) {
    std::promise<std::shared_ptr<CapturedGraph>> got;
    auto job = graphs_->capture_async(*tenant_, std::move(cr), "capture",
                                      [&got](Job&, const std::shared_ptr<CapturedGraph>& g) { got.set_value(g); });
    auto f = got.get_future();
    if (f.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
      ADD_FAILURE() << "the capture did not end within 120 s";
      std::_Exit(3);
    }
    std::shared_ptr<CapturedGraph> g = f.get();
    if (!g) Engine::result_of(*job);  // throws the capture's error
    return g;
  }
  JobResult replay(const std::shared_ptr<CapturedGraph>& g, int R, int round) {
    JobSpec spec;
    spec.spmd = spmd_inputs(R, round);
    std::promise<void> ended;
    auto job = graphs_->replay_async(*tenant_, g, std::move(spec), [&ended](Job&) { ended.set_value(); });
    if (ended.get_future().wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
      ADD_FAILURE() << "a replay did not end within 120 s";
      std::_Exit(3);
    }
    return Engine::result_of(*job);
  }
  JobResult run_directly(int R, int round, bool barrier = false) {
    JobSpec spec;
    spec.program = program(barrier);
    spec.spmd = spmd_inputs(R, round);
    return run_job(*engine_, *tenant_, std::move(spec));
  }

  // Captures the program on R ranks and checks each member is a device
  // graph with its three collectives, then replays it twice: the numbers of
  // the program run directly, three new seqs per replay on every rank (the
  // same on all), their entries completed.
  void captured_replays_match(int R) {
    start(R);
    std::shared_ptr<CapturedGraph> g = capture(capture_request(R));
    ASSERT_TRUE(g && g->spmd) << "no SPMD graph came back";
    ASSERT_EQ(g->spmd->members.size(), static_cast<size_t>(R));
    for (int i = 0; i < R; ++i) {
      const GraphMember& m = g->spmd->members[static_cast<size_t>(i)];
      ASSERT_NE(m.device_graph, nullptr) << "member " << i
                                         << " fell back to the executor: it was not captured into a device graph";
      EXPECT_TRUE(m.device_graph->captured()) << "member " << i << ": captured at capture time, before any replay";
      EXPECT_EQ(m.device_graph->collectives(), 3u)
          << "member " << i << ": all_reduce, all_gather and broadcast captured as NCCL calls";
      EXPECT_GT(m.device_graph->nodes(), 3u) << "member " << i << ": the graph holds the mul and the NCCL kernels";
    }
    std::vector<RankLog> before;
    for (int r = 0; r < R; ++r) {
      before.push_back(rank_log(*engine_, r));
      EXPECT_EQ(before[static_cast<size_t>(r)].completed_nccl, 0)
          << "rank " << r << ": the check before the capture must record no collective";
    }
    for (int round = 1; round <= 2; ++round) {
      const std::string what = "replay " + std::to_string(round);
      const JobResult got = replay(g, R, round);
      EXPECT_TRUE(got.spmd) << what;
      EXPECT_EQ(got.backend, "cuda") << what;
      for (int r = 0; r < R; ++r) {
        const RankLog l = rank_log(*engine_, r);
        RankLog& b = before[static_cast<size_t>(r)];
        EXPECT_EQ(l.last_enqueued, b.last_enqueued + 3)
            << what << ", rank " << r << ": each replay takes the group's next seq for each captured collective";
        EXPECT_EQ(l.last_completed, l.last_enqueued)
            << what << ", rank " << r << ": the entries complete once the launch finished";
        EXPECT_EQ(l.completed_nccl, b.completed_nccl + 3)
            << what << ", rank " << r << ": completed nccl:* flight-recorder entries of the replay";
        EXPECT_EQ(l.last_enqueued, rank_log(*engine_, 0).last_enqueued) << what << ": every rank has the same seqs";
      }
      const JobResult want = run_directly(R, round);  // uncaptured: three more seqs, completed
      expect_same(got, want, what);
      for (int r = 0; r < R; ++r) {
        const RankLog l = rank_log(*engine_, r);
        RankLog& b = before[static_cast<size_t>(r)];
        EXPECT_EQ(l.last_enqueued, b.last_enqueued + 6)
            << what << ", rank " << r << ": the uncaptured run continues the replay's seqs";
        b = l;
      }
    }
    for (int i = 0; i < R; ++i) {
      EXPECT_EQ(g->spmd->members[static_cast<size_t>(i)].device_graph->captures(), 1)
          << "member " << i << ": the replays launched the graph captured at capture time";
    }
    EXPECT_EQ(g->replays.load(), 2);
  }

  int gpus_ = 0;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<GraphService> graphs_;
  std::unique_ptr<Tenant> tenant_;
};

TEST_F(SpmdGraphNcclTest, OneRankGraphIsADeviceGraphWithNcclCaptured) {
  captured_replays_match(1);
}

TEST_F(SpmdGraphNcclTest, TwoRankGraphIsADeviceGraphPerRankWithNcclCaptured) {
  if (gpus_ < 2) GTEST_SKIP() << "needs 2 GPUs (one rank per GPU); " << gpus_ << " visible";
  captured_replays_match(2);
}

TEST_F(SpmdGraphNcclTest, AReplacedGroupCapturesAgain) {
  start(1);
  std::shared_ptr<CapturedGraph> g = capture(capture_request(1));
  ASSERT_TRUE(g && g->spmd);
  ASSERT_NE(g->spmd->members[0].device_graph, nullptr) << "not captured into a device graph";
  replay(g, 1, 1);
  // A job that fails on NCCL (all_gather along dim 1: NCCL takes dim 0
  // only) retires the group: the next job meets in a new one.
  JobSpec bad;
  bad.program.nodes = {node("g", "dist.all_gather", {ref("x")}, {"g"}, {{"dim", lit(Attr(int64_t{1}))}})};
  bad.program.outputs = {"g"};
  bad.spmd.emplace();
  bad.spmd->count = 1;
  Tensor x2 = Tensor::empty_host(DType::kFloat32, {2, 2});
  for (int i = 0; i < 4; ++i) x2.data_ptr<float>()[i] = static_cast<float>(i);
  bad.spmd->inputs["x"].per_rank = {x2};
  try {
    run_job(*engine_, *tenant_, bad);
    FAIL() << "an all_gather along dim 1 on NCCL ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.message();
  }
  const JobResult got = replay(g, 1, 3);
  EXPECT_EQ(g->spmd->members[0].device_graph->captures(), 2)
      << "the graph was captured in the retired group: the replay must capture it again in the new one";
  expect_same(got, run_directly(1, 3), "the replay after the group was replaced");
}

TEST_F(SpmdGraphNcclTest, AProgramThatCannotBeCapturedReplaysThroughTheExecutor) {
  start(1);
  std::shared_ptr<CapturedGraph> g = capture(capture_request(1, /*barrier=*/true));
  ASSERT_TRUE(g && g->spmd);
  EXPECT_EQ(g->spmd->members[0].device_graph, nullptr)
      << "a dist.barrier (no result) is not captured: the member should replay through the executor";
  const RankLog b = rank_log(*engine_, 0);
  const JobResult got = replay(g, 1, 1);
  EXPECT_EQ(rank_log(*engine_, 0).last_enqueued, b.last_enqueued + 4) << "three collectives and the barrier";
  expect_same(got, run_directly(1, 1, true), "the executor's replay");
}
#else
TEST(SpmdGraphNcclTest, NeedsNccl) {
  GTEST_SKIP() << "built without NCCL (libnccl not found at configure time)";
}
#endif

// Wherever the CUDA library is built: the collectives with a result are
// capture-safe on CUDA, but only where a graph may hold collectives.
TEST(SpmdGraphNcclNoDevice, CollectivesAreCapturableOnlyInAnSpmdMember) {
  dist::link_dist_ops();
  for (const char* op :
       {"dist.all_reduce", "dist.all_gather", "dist.reduce_scatter", "dist.broadcast", "dist.all_to_all"}) {
    const OpDef* d = OpRegistry::global().find(op);
    ASSERT_NE(d, nullptr) << op;
    EXPECT_TRUE(d->collective) << op;
    EXPECT_TRUE(d->capture_safe.count("cuda")) << op << " should be capture-safe on cuda";
  }
  const OpDef* barrier = OpRegistry::global().find("dist.barrier");
  ASSERT_NE(barrier, nullptr);
  EXPECT_FALSE(barrier->capture_safe.count("cuda")) << "a barrier has no result to capture";

  std::map<std::string, TensorMeta> in = {{"x", TensorMeta{DType::kFloat32, {kN}}}};
  const CompiledProgram cp = compile_program(program(), in, nullptr);
  EXPECT_TRUE(DeviceGraph::capturable(cp, "cuda", true)) << "an SPMD member's program with top-level collectives";
  EXPECT_FALSE(DeviceGraph::capturable(cp, "cuda", false)) << "a graph without ranks keeps collectives uncaptured";
  const CompiledProgram with_barrier = compile_program(program(true), in, nullptr);
  EXPECT_FALSE(DeviceGraph::capturable(with_barrier, "cuda", true));
}

}  // namespace
}  // namespace tensord
