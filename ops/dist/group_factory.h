// GroupFactory: how a server's rank joins a group when its collectives are
// not Gloo's (API.md 8: "the engine is NCCL on CUDA"). The rank workers
// (scheduler/rank_workers.h) make Gloo groups themselves; a device
// backend's library provides a factory (ops/dist/nccl/nccl_process_group.h:
// nccl_group_factory) and the server hands it to the engine. Header only:
// the scheduler uses the type without linking the device library.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "ops/dist/process_group.h"

namespace gloo::rendezvous {
class Store;
}

namespace tensord::dist {

// Where and as whom a member joins.
struct GroupJoin {
  int local_rank = 0;  // which of this server's ranks (0..--ranks-1): its device
  std::shared_ptr<gloo::rendezvous::Store> store;
  std::string key_prefix;  // unique per group generation (rank_workers)
  std::chrono::milliseconds rendezvous_timeout{60000};
};

struct GroupFactory {
  std::string backend;  // "nccl": what the groups' backend_name() says
  std::string version;  // the library's, for the ranks' flight recorders
  // Member `rank` of a group of `size`; blocks until every member joined.
  std::function<std::unique_ptr<ProcessGroup>(int rank, int size, ProcessGroupOptions, const GroupJoin&)> make;
};

}  // namespace tensord::dist
