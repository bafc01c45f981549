// SpmdPeersHttp's store handling: ranks' URLs written at start and looked
// up; a store that fails answers unavailable naming it (no Gloo paths); a
// rank found before is looked for where it was while the store is gone; a
// store that comes back empty gets this server's URLs again from the
// keeper, and one that was gone at start gets them once it answers.
#include "server/spmd_peers_http.h"

#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>

#include "ops/dist/named_store.h"
#include "ops/dist/store.h"
#include "ops/error.h"

namespace tensord {
namespace {

using std::chrono::milliseconds;

// A store whose server can go away: every call throws as Gloo's RedisStore
// does on a closed connection while `down` is set.
class FlakyStore final : public gloo::rendezvous::Store {
 public:
  explicit FlakyStore(std::shared_ptr<std::atomic<bool>> down) : down_(std::move(down)) {}
  void set(const std::string& k, const std::vector<char>& v) override {
    check();
    inner_.set(k, v);
  }
  std::vector<char> get(const std::string& k) override {
    check();
    return inner_.get(k);
  }
  void wait(const std::vector<std::string>& k) override {
    check();
    inner_.wait(k);
  }
  void wait(const std::vector<std::string>& k, const milliseconds& t) override {
    check();
    inner_.wait(k, t);
  }

 private:
  void check() const {
    if (*down_) throw std::runtime_error("[./gloo/rendezvous/redis_store.cc:93] Server closed the connection");
  }
  std::shared_ptr<std::atomic<bool>> down_;
  gloo::rendezvous::HashStore inner_;
};

// The factory a server gets: a fresh connection to "the" store each time;
// `replace` makes the next one a new, empty store (a restarted Redis).
struct World {
  std::shared_ptr<std::atomic<bool>> down = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<gloo::rendezvous::Store> current;
  std::atomic<int> made{0};
  World() { replace(); }
  void replace() {
    current = std::make_shared<dist::NamedStore>(std::make_shared<FlakyStore>(down), "redis://store:6379");
  }
  SpmdPeersHttp::StoreFactory factory() {
    return [this] {
      ++made;
      if (*down)
        throw Error(ErrorCode::kUnavailable, "rendezvous store redis://store:6379: nothing accepts connections");
      return current;
    };
  }
};

bool eventually(const std::function<bool()>& f) {
  for (int i = 0; i < 200; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

TEST(SpmdPeersHttp, RanksAreFoundThroughTheStore) {
  World w;
  SpmdPeersHttp a(w.factory(), milliseconds(200), milliseconds(20));
  SpmdPeersHttp b(w.factory(), milliseconds(200), milliseconds(20));
  EXPECT_FALSE(a.register_ranks("http://a:1", 0, 1).has_value());
  EXPECT_FALSE(b.register_ranks("http://b:2", 1, 2).has_value());
  EXPECT_EQ(a.server_of(1), "http://b:2");
  EXPECT_EQ(a.server_of(2), "http://b:2");
  EXPECT_EQ(b.server_of(0), "http://a:1");
  try {
    a.server_of(3);
    FAIL() << "rank 3 has no server";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_EQ(e.message(), "rank 3's server has not joined the world");
  }
}

TEST(SpmdPeersHttp, ALostStoreIsNamedAndAKnownRankIsLookedForWhereItWas) {
  World w;
  SpmdPeersHttp a(w.factory(), milliseconds(200), milliseconds(20));
  SpmdPeersHttp b(w.factory(), milliseconds(200), milliseconds(20));
  ASSERT_FALSE(a.register_ranks("http://a:1", 0, 1).has_value());
  ASSERT_FALSE(b.register_ranks("http://b:2", 1, 1).has_value());
  ASSERT_EQ(a.server_of(1), "http://b:2");
  *w.down = true;
  EXPECT_EQ(a.server_of(1), "http://b:2") << "found before: where it was";
  SpmdPeersHttp c(w.factory(), milliseconds(200), milliseconds(20));
  try {
    c.server_of(1);
    FAIL() << "never found, the store gone";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(e.message().find("rendezvous store redis://store:6379"), std::string::npos) << e.message();
    EXPECT_EQ(e.message().find("gloo/"), std::string::npos) << e.message();
  }
}

TEST(SpmdPeersHttp, TheKeeperWritesTheUrlsAgainIntoAStoreThatCameBackEmpty) {
  World w;
  SpmdPeersHttp b(w.factory(), milliseconds(200), milliseconds(20));
  ASSERT_FALSE(b.register_ranks("http://b:2", 1, 1).has_value());
  *w.down = true;
  const int before = w.made;
  ASSERT_TRUE(eventually([&] { return w.made > before; })) << "the keeper connects again after a failure";
  w.replace();  // a new, empty store
  *w.down = false;
  ASSERT_TRUE(eventually([&] { return dist::store_has_key(*w.current, "tensord/rank/1/0"); }));
  EXPECT_EQ(dist::store_get(*w.current, "tensord/rank/1/0"), "http://b:2");
  SpmdPeersHttp a(w.factory(), milliseconds(200), milliseconds(20));
  EXPECT_EQ(a.server_of(1), "http://b:2");
}

TEST(SpmdPeersHttp, RanksRegisteredWhileTheStoreIsGoneAreWrittenOnceItAnswers) {
  World w;
  *w.down = true;
  SpmdPeersHttp b(w.factory(), milliseconds(200), milliseconds(20));
  const auto failed = b.register_ranks("http://b:2", 1, 1);
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->code(), ErrorCode::kUnavailable);
  *w.down = false;
  ASSERT_TRUE(eventually([&] { return dist::store_has_key(*w.current, "tensord/rank/1/0"); }));
}

}  // namespace
}  // namespace tensord
