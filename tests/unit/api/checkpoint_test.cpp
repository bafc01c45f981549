#include "api/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "ops/error.h"
#include "scheduler/tenant.h"
#include "tests/unit/graphs/program_builder.h"

namespace tensord {
namespace {
using namespace testing_util;
namespace fs = std::filesystem;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/tensord-ckpt-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

TEST(Checkpoint, WritesAndRestoresEveryTensorWithItsVersion) {
  TempDir d;
  Tenant a("alice");
  a.store.put("w/x", f32({3}, {1, 2, 3}));
  a.store.put("w/y", f32({2}, {4, 5}));
  CheckpointInfo ci = write_checkpoint(d.path, a);
  EXPECT_EQ(ci.tensors, 2);
  EXPECT_EQ(ci.bytes, 20);
  EXPECT_EQ(ci.version, a.store.version());
  Tenant b("alice");
  RestoreInfo ri = restore_checkpoint(d.path, b);
  EXPECT_TRUE(ri.skipped.empty()) << ri.skipped;
  EXPECT_EQ(ri.tensors, 2);
  EXPECT_FALSE(ri.over_quota);
  ASSERT_TRUE(b.store.get("w/y"));
  EXPECT_FLOAT_EQ(b.store.get("w/y")->data_ptr<float>()[1], 5.f);
  EXPECT_EQ(b.account->used(), 20);
}

TEST(Checkpoint, ATornFileIsSkippedWholeAndLeftInPlace) {
  TempDir d;
  Tenant a("alice");
  a.store.put("w/x", f32({256}, std::vector<float>(256, 1.f)));
  a.store.put("w/y", f32({4}, {1, 2, 3, 4}));
  CheckpointInfo ci = write_checkpoint(d.path, a);
  const auto size = fs::file_size(ci.path);
  for (auto cut : {size - 1, size / 2, uintmax_t{12}, uintmax_t{3}}) {
    fs::resize_file(ci.path, cut);
    Tenant b("alice");
    RestoreInfo ri = restore_checkpoint(d.path, b);
    EXPECT_FALSE(ri.skipped.empty()) << "cut at " << cut;
    EXPECT_EQ(ri.tensors, 0);
    EXPECT_TRUE(b.store.list("").empty()) << "never half-loaded (cut at " << cut << ")";
    EXPECT_EQ(b.account->used(), 0);
    EXPECT_TRUE(fs::exists(ci.path));
  }
}

TEST(Checkpoint, NoFileIsNotAnError) {
  TempDir d;
  Tenant b("nobody");
  RestoreInfo ri = restore_checkpoint(d.path, b);
  EXPECT_TRUE(ri.skipped.empty());
  EXPECT_EQ(ri.tensors, 0);
}

TEST(Checkpoint, RestoresPastAShrunkQuota) {
  TempDir d;
  Tenant a("alice");
  a.store.put("big", f32({1000}, std::vector<float>(1000, 2.f)));
  write_checkpoint(d.path, a);
  Tenant b("alice", /*memory_limit=*/1024);
  RestoreInfo ri = restore_checkpoint(d.path, b);
  EXPECT_TRUE(ri.skipped.empty()) << ri.skipped;
  EXPECT_TRUE(ri.over_quota);
  EXPECT_EQ(b.account->used(), 4000);
  EXPECT_THROW(b.store.put("more", f32({1}, {1})), Error) << "new writes are refused past the quota";
}

TEST(Checkpoint, ConcurrentWritesUseTheirOwnTempFilesAndStaleOnesAreRemoved) {
  TempDir d;
  Tenant a("alice");
  a.store.put("x", f32({4096}, std::vector<float>(4096, 3.f)));
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&] {
      write_checkpoint(d.path, a);
      ok.fetch_add(1);
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 8);
  int files = 0;
  for (const auto& e : fs::directory_iterator(d.path)) {
    ++files;
    EXPECT_EQ(e.path().filename(), "alice.safetensors");
  }
  EXPECT_EQ(files, 1);
  // A crash between write and rename leaves a temp file: the next start removes it.
  std::ofstream(d.path + "/alice.safetensors.tmp.AbC123") << "partial";
  std::ofstream(d.path + "/bob.safetensors.tmp.AbC123") << "not alice's";
  Tenant b("alice");
  RestoreInfo ri = restore_checkpoint(d.path, b);
  EXPECT_EQ(ri.removed_temps, 1);
  EXPECT_EQ(ri.tensors, 1);
  EXPECT_TRUE(fs::exists(d.path + "/bob.safetensors.tmp.AbC123"));
}

}  // namespace
}  // namespace tensord
