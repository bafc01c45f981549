// Static buffer assignment (graphs/buffer_plan.h) and the graph pool's
// chunk binding (graphs/graph_pool.h).
#include "graphs/buffer_plan.h"

#include <gtest/gtest.h>

#include "graphs/graph_pool.h"
#include "ops/backend.h"
#include "ops/error.h"
#include "ops/memory_account.h"

namespace tensord {
namespace {

// True when no two uses that are live at a common instruction share a buffer.
bool no_overlap(const std::vector<BufferUse>& uses, const BufferAssignment& a) {
  for (size_t i = 0; i < uses.size(); ++i) {
    for (size_t j = i + 1; j < uses.size(); ++j) {
      const bool overlap = uses[i].def <= uses[j].last && uses[j].def <= uses[i].last;
      if (overlap && a.buffer_of[i] == a.buffer_of[j]) return false;
    }
  }
  return true;
}

TEST(BufferPlan, DisjointLifetimesShareOverlappingOnesDoNot) {
  // a: 0..1, b: 1..2, c: 2..3 -> a and c may share, b may not with either.
  std::vector<BufferUse> uses = {{0, 1, 64}, {1, 2, 64}, {2, 3, 64}};
  BufferAssignment a = assign_buffers(uses);
  EXPECT_EQ(a.sizes.size(), 2u);
  EXPECT_EQ(a.buffer_of[0], a.buffer_of[2]);
  EXPECT_NE(a.buffer_of[0], a.buffer_of[1]);
  EXPECT_TRUE(no_overlap(uses, a));
}

TEST(BufferPlan, ResultsOfOneInstructionNeverShare) {
  std::vector<BufferUse> uses = {{0, 0, 64}, {0, 0, 64}, {0, 5, 128}};
  BufferAssignment a = assign_buffers(uses);
  EXPECT_EQ(a.sizes.size(), 3u);
  EXPECT_TRUE(no_overlap(uses, a));
}

TEST(BufferPlan, ABufferHoldsItsLargestUse) {
  std::vector<BufferUse> uses = {{0, 0, 64}, {1, 1, 256}, {2, 2, 128}};
  BufferAssignment a = assign_buffers(uses);
  ASSERT_EQ(a.sizes.size(), 1u);
  EXPECT_EQ(a.sizes[0], 256u);
}

TEST(BufferPlan, ProgramOutputsLiveToTheEnd) {
  std::vector<BufferUse> uses;
  for (int i = 0; i < 10; ++i) uses.push_back({i, i == 3 ? INT32_MAX : i + 1, 64});
  BufferAssignment a = assign_buffers(uses);
  EXPECT_TRUE(no_overlap(uses, a));
  for (size_t i = 4; i < uses.size(); ++i) EXPECT_NE(a.buffer_of[i], a.buffer_of[3]);
  EXPECT_LE(a.sizes.size(), 3u);
}

TEST(GraphPool, BindsDistinctChunksAndReusesThemAcrossGraphs) {
  auto acct = std::make_shared<MemoryAccount>("t");
  {
    GraphPool pool(nullptr, Device{}, acct);
    auto first = pool.bind({256, 64, 64});
    ASSERT_EQ(first.size(), 3u);
    EXPECT_NE(first[1].storage(), first[2].storage());
    EXPECT_GE(first[0].nbytes(), 256u);
    EXPECT_EQ(pool.reserved(), 256 + 64 + 64);
    // A second graph: its 200-byte buffer takes the 256 chunk, the 64s the 64s.
    auto second = pool.bind({64, 200, 64});
    EXPECT_EQ(pool.chunks(), 3u);
    EXPECT_EQ(second[1].storage(), first[0].storage());
    // One larger than any chunk: a new chunk.
    auto third = pool.bind({1024});
    EXPECT_EQ(pool.chunks(), 4u);
    EXPECT_EQ(pool.reserved(), 256 + 64 + 64 + 1024);
  }
}

TEST(GraphPool, QuotaErrorAddsNothing) {
  auto acct = std::make_shared<MemoryAccount>("t", 1000);
  std::unique_ptr<Backend> cpu = make_backend("cpu", 1);
  GraphPool pool(cpu.get(), Device{}, acct);
  pool.bind({512});
  EXPECT_EQ(acct->used(), 512);
  try {
    pool.bind({64, 512});   // the 512 chunk, and a new 64 one: 576 bytes
    pool.bind({512, 512});  // the 512 chunk, and a new 512 one: over 1000
    FAIL() << "over quota";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kQuotaExceeded);
  }
  EXPECT_EQ(pool.chunks(), 2u) << "the failed bind added no chunk";
  EXPECT_EQ(acct->used(), pool.reserved());
}

}  // namespace
}  // namespace tensord
