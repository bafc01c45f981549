// How an SPMD job reaches the group's ranks on other servers of its world
// (API.md 8: the server whose offset is 0 coordinates and forwards each
// rank's part to its peers over their normal HTTP API). The server
// implements it (server/spmd_peers_http.*); a world of one server has none.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "ops/tensor.h"
#include "scheduler/job_spec.h"

namespace tensord {

class SpmdPeers {
 public:
  virtual ~SpmdPeers() = default;
  // An id of the server holding global rank g (members with the same id go
  // in one part); throws Error(kUnavailable) when that server has not
  // joined the world.
  virtual std::string server_of(int g) = 0;
  // Runs `members` (indices into `group`, all on server `server`) of the
  // job there; blocks until it answers, and returns each output with one
  // tensor (replicated) or one per member, in member order. Throws the
  // peer's error, or Error(kDeadlineExceeded / kUnavailable) when it cannot
  // be reached or does not answer by `deadline`.
  virtual std::vector<std::pair<std::string, std::vector<Tensor>>> run_part(
      const std::string& server, const JobSpec& spec, const std::vector<int>& group, const std::vector<size_t>& members,
      const std::string& key, std::chrono::steady_clock::time_point deadline) = 0;
};

}  // namespace tensord
