#include "scheduler/tensor_store.h"

#include <gtest/gtest.h>

#include "ops/error.h"

namespace tensord {
namespace {

Tensor f32(int64_t n, float v = 1.f) {
  Tensor t = Tensor::empty_host(DType::kFloat32, {n});
  for (int64_t i = 0; i < n; ++i) t.data_ptr<float>()[i] = v;
  return t;
}

TEST(TensorName, AcceptsPaths) {
  for (const char* ok : {"a", "a/b", "w1.weight", "opt/adam-1/exp_avg", "A_b.c-d/e"}) {
    EXPECT_NO_THROW(validate_tensor_name(ok)) << ok;
  }
}

TEST(TensorName, RejectsTricks) {
  for (std::string bad : std::vector<std::string>{"", "/a", "a/", "a//b", "../x", "a/../b", "./a", "a/.", "a b", "a\\b",
                                                  "a%2fb", std::string(257, 'a'), std::string("a\0b", 3), "é"}) {
    try {
      validate_tensor_name(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
    }
  }
}

TEST(TensorStore, PutGetReplaceEraseAccounting) {
  auto acct = std::make_shared<MemoryAccount>("t", 1000);
  TensorStore s(acct);
  EXPECT_TRUE(s.put("a", f32(10)));
  EXPECT_EQ(acct->used(), 40);
  EXPECT_FALSE(s.put("a", f32(20)));  // replace
  EXPECT_EQ(acct->used(), 80);
  ASSERT_TRUE(s.get("a"));
  EXPECT_EQ(s.get("a")->numel(), 20);
  EXPECT_TRUE(s.erase("a"));
  EXPECT_FALSE(s.erase("a"));
  EXPECT_EQ(acct->used(), 0);
}

TEST(TensorStore, QuotaRefusalKeepsOldValue) {
  auto acct = std::make_shared<MemoryAccount>("t", 100);
  TensorStore s(acct);
  s.put("a", f32(10, 7.f));
  try {
    s.put("a", f32(100));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kQuotaExceeded);
  }
  EXPECT_EQ(s.get("a")->numel(), 10);
  EXPECT_EQ(acct->used(), 40);
}

TEST(TensorStore, CommitIsAllOrNothing) {
  auto acct = std::make_shared<MemoryAccount>("t", 100);
  TensorStore s(acct);
  s.put("keep", f32(5, 3.f));
  std::vector<std::pair<std::string, Tensor>> writes{{"x", f32(5)}, {"y", f32(50)}};
  EXPECT_THROW(s.commit(std::move(writes)), Error);
  EXPECT_FALSE(s.get("x"));
  EXPECT_FALSE(s.get("y"));
  EXPECT_EQ(acct->used(), 20);
  s.commit({{"x", f32(5)}, {"keep", f32(5, 9.f)}});
  EXPECT_FLOAT_EQ(s.get("keep")->data_ptr<float>()[0], 9.f);
  EXPECT_EQ(acct->used(), 40);
}

TEST(TensorStore, ChargesPerAllocation) {
  auto acct = std::make_shared<MemoryAccount>("t");
  TensorStore s(acct);
  {
    Tensor t = f32(10);
    s.put("a", t);
    s.put("b", t);  // the same buffer under two names: one allocation
    EXPECT_EQ(acct->used(), 40);
  }
  s.erase("a");
  EXPECT_EQ(acct->used(), 40);
  s.erase("b");
  EXPECT_EQ(acct->used(), 0);
}

TEST(TensorStore, BufferOfAnotherTenantIsCopied) {
  auto a = std::make_shared<MemoryAccount>("a");
  auto b = std::make_shared<MemoryAccount>("b");
  TensorStore sa(a), sb(b);
  Tensor t = f32(10);
  sa.put("x", t);
  sb.put("x", t);
  EXPECT_EQ(a->used(), 40);
  EXPECT_EQ(b->used(), 40);
  EXPECT_NE(sa.get("x")->data(), sb.get("x")->data());
}

TEST(TensorStore, ListByPrefix) {
  TensorStore s(std::make_shared<MemoryAccount>("t"));
  s.put("a/1", f32(1));
  s.put("a/2", f32(2));
  s.put("b/1", f32(3));
  auto l = s.list("a/");
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].name, "a/1");
  EXPECT_EQ(l[1].bytes, 8);
  EXPECT_EQ(s.list("").size(), 3u);
  EXPECT_TRUE(s.list("zz").empty());
}

}  // namespace
}  // namespace tensord
