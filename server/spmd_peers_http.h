// SpmdPeers over HTTP (API.md 8, worlds across servers): each server
// writes the URL of each of its global ranks into the world's store
// ("tensord/rank/<g>") when it starts serving; a coordinator reads them
// to find a rank's server and forwards that server's members of the
// group to its normal POST /v1/run, with the caller's Authorization, so a
// world may span machines without trusting the network.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "scheduler/spmd_peers.h"

namespace gloo::rendezvous {
class Store;
}

namespace tensord {

class SpmdPeersHttp final : public SpmdPeers {
 public:
  using StoreFactory = std::function<std::shared_ptr<gloo::rendezvous::Store>()>;
  SpmdPeersHttp(const StoreFactory& make_store, std::chrono::milliseconds lookup_timeout);
  // Writes this server's URL for global ranks [first, first + count).
  void register_ranks(const std::string& url, int first, int count);

  std::string server_of(int g) override;
  std::vector<std::pair<std::string, std::vector<Tensor>>> run_part(
      const std::string& server, const JobSpec& spec, const std::vector<int>& group, const std::vector<size_t>& members,
      const std::string& key, std::chrono::steady_clock::time_point deadline) override;

 private:
  std::mutex mu_;  // a store connection serves one thread at a time
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::chrono::milliseconds lookup_timeout_;
};

}  // namespace tensord
