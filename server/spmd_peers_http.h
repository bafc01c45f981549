// SpmdPeers over HTTP (API.md 8, worlds across servers): each server
// writes the URL of each of its global ranks into the world's store
// ("tensord/rank/<g>") when it starts serving; a coordinator reads them
// to find a rank's server and forwards that server's members of the
// group to its normal POST /v1/run, with the caller's Authorization, so a
// world may span machines without trusting the network.
//
// The store may go away (Redis restarted or lost): a failed store call
// answers unavailable naming the store (ops/dist/named_store.h), the next
// one connects again, and a rank whose server was found before is looked
// for where it was while the store cannot say (a store back empty holds no
// URLs until the servers start again): the part's own join through the
// store then fails by name, or succeeds once the store is back, so a world
// forms again without restarting its servers. A keeper thread writes this
// server's URLs again when the store has lost them (checked every
// `keep_every`).
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ops/error.h"
#include "scheduler/spmd_peers.h"

namespace gloo::rendezvous {
class Store;
}

namespace tensord {

class SpmdPeersHttp final : public SpmdPeers {
 public:
  using StoreFactory = std::function<std::shared_ptr<gloo::rendezvous::Store>()>;
  SpmdPeersHttp(const StoreFactory& make_store, std::chrono::milliseconds lookup_timeout,
                std::chrono::milliseconds keep_every = std::chrono::seconds(2));
  ~SpmdPeersHttp() override;
  SpmdPeersHttp(const SpmdPeersHttp&) = delete;
  SpmdPeersHttp& operator=(const SpmdPeersHttp&) = delete;
  // Writes this server's URL for global ranks [first, first + count), and
  // again whenever the store has lost it; what failed when the store could
  // not take it now (the keeper tries again).
  std::optional<Error> register_ranks(const std::string& url, int first, int count);

  std::string server_of(int g) override;
  std::vector<std::pair<std::string, std::vector<Tensor>>> run_part(
      const std::string& server, const JobSpec& spec, const std::vector<int>& group, const std::vector<size_t>& members,
      const std::string& key, std::chrono::steady_clock::time_point deadline) override;

 private:
  // The store, connected on first use and again after a failure.
  gloo::rendezvous::Store& store();
  // Rank g's URL in the store now, or empty; a failure drops the store.
  std::string lookup(int g);
  // Writes url for rank g in the next free slot (mu_ held).
  void write_rank(int g);
  // Every keep_every: this server's ranks written again where the store lost them.
  void keep_loop();

  std::mutex mu_;  // a store connection serves one thread at a time; guards all below
  StoreFactory make_store_;
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::map<int, std::string> known_;  // the URLs found so far, by global rank
  std::chrono::milliseconds lookup_timeout_;
  std::chrono::milliseconds keep_every_;
  std::string url_;           // this server's, once registered
  std::map<int, int> slots_;  // this server's ranks: the slot each was written to
  std::condition_variable keep_cv_;
  bool stopping_ = false;
  std::thread keeper_;
};

}  // namespace tensord
