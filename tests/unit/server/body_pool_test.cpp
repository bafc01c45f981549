// server/body_pool.h: released large bodies come back for the next upload.
#include "server/body_pool.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "api/http_types.h"

namespace tensord {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(BodyPool, AReleasedBodyServesTheNextOneOfItsSize) {
  BodyPool pool(64 * kMiB);
  std::string a = pool.take(8 * kMiB);
  EXPECT_TRUE(a.empty());
  ASSERT_GE(a.capacity(), 8 * kMiB);
  a.assign(8 * kMiB, 'x');
  const char* p = a.data();
  pool.recycle(std::move(a));
  EXPECT_GE(pool.cached_bytes(), 8 * kMiB);

  // Too large for it, or less than half of it: not served from it.
  std::string big = pool.take(9 * kMiB);
  EXPECT_NE(big.data(), p);
  std::string small = pool.take(4 * kMiB - 1);
  EXPECT_NE(small.data(), p);
  std::string same = pool.take(7 * kMiB);
  EXPECT_EQ(same.data(), p);
  EXPECT_TRUE(same.empty());
  EXPECT_EQ(pool.cached_bytes(), 0u);
}

TEST(BodyPool, ASizedTakeKeepsTheOldSizeInsteadOfZeroFilling) {
  BodyPool pool(64 * kMiB);
  std::string a = pool.take_sized(8 * kMiB);
  ASSERT_EQ(a.size(), 8 * kMiB);
  a.assign(8 * kMiB, 'x');
  const char* p = a.data();
  pool.recycle(std::move(a));
  // Smaller: the pooled string is cut, its bytes left as they were.
  std::string b = pool.take_sized(6 * kMiB);
  ASSERT_EQ(b.data(), p);
  ASSERT_EQ(b.size(), 6 * kMiB);
  EXPECT_EQ(b[0], 'x');
  EXPECT_EQ(b[6 * kMiB - 1], 'x');
  b[0] = 'y';
  pool.recycle(std::move(b));
  // Larger than its old size (within its capacity): only the rest is filled.
  std::string c = pool.take_sized(8 * kMiB);
  ASSERT_EQ(c.data(), p);
  EXPECT_EQ(c[0], 'y');
  EXPECT_EQ(c[6 * kMiB], '\0');
  pool.recycle(std::move(c));
  // take() still hands out an empty string.
  EXPECT_TRUE(pool.take(8 * kMiB).empty());
}

TEST(BodyPool, SmallStringsAreNotKeptAndTheCapacityHolds) {
  BodyPool pool(20 * kMiB);
  std::string tiny(1000, 'x');
  pool.recycle(std::move(tiny));
  EXPECT_EQ(pool.cached_bytes(), 0u);
  std::string a = pool.take(8 * kMiB), b = pool.take(8 * kMiB), c = pool.take(8 * kMiB);
  const char* pc = c.data();
  pool.recycle(std::move(a));
  pool.recycle(std::move(b));
  pool.recycle(std::move(c));  // the oldest (a) goes to make room
  EXPECT_LE(pool.cached_bytes(), 20 * kMiB);
  EXPECT_GE(pool.cached_bytes(), 16 * kMiB);
  std::string d = pool.take(8 * kMiB), e = pool.take(8 * kMiB);
  EXPECT_TRUE(d.data() == pc || e.data() == pc) << "the newest was dropped";
  pool.trim();
  EXPECT_EQ(pool.cached_bytes(), 0u);
}

TEST(BodyPool, ASharedBodyReturnsWhenItsLastOwnerGoes) {
  auto pool = std::make_shared<BodyPool>(64 * kMiB);
  HttpRequest req;
  req.recycler = pool;
  req.body = pool->take(8 * kMiB);
  req.body.assign(8 * kMiB, 'y');
  const char* p = req.body.data();
  std::shared_ptr<const std::string> shared = req.share_body();
  EXPECT_TRUE(req.body.empty());
  EXPECT_EQ(shared->data(), p);
  auto second = shared;
  shared.reset();
  EXPECT_EQ(pool->cached_bytes(), 0u) << "recycled while still owned";
  second.reset();
  EXPECT_GE(pool->cached_bytes(), 8 * kMiB);
  EXPECT_EQ(pool->take(8 * kMiB).data(), p);

  // A request that dies holding its body gives it back too; one whose pool
  // is gone frees it.
  {
    HttpRequest r;
    r.recycler = pool;
    r.body.assign(6 * kMiB, 'z');
  }
  EXPECT_GE(pool->cached_bytes(), 6 * kMiB);
  HttpRequest orphan;
  orphan.recycler = pool;
  orphan.body.assign(6 * kMiB, 'w');
  auto body = orphan.share_body();
  pool->trim();
  std::weak_ptr<BodyPool> gone = pool;
  orphan.recycler.reset();
  req.recycler.reset();
  pool.reset();
  EXPECT_TRUE(gone.expired());
  body.reset();  // no pool to return to: freed, no crash
}

}  // namespace
}  // namespace tensord
