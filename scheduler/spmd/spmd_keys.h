// Where a group's members meet in the rendezvous store:
// "<group>#<boot id>.<generation>". A job that failed in a group moves it
// to a fresh generation (its members may have left the old one in any
// state); the boot id keeps this run's keys apart from an earlier run's in
// a store that outlives the process (Redis). Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace tensord {

class SpmdKeys {
 public:
  SpmdKeys();
  // The group's key now; `replace`: its next generation's (after a failure).
  std::string key(const std::string& group, bool replace);

 private:
  std::mutex mu_;
  std::map<std::string, uint64_t> generation_;
  uint64_t boot_id_ = 0;
};

}  // namespace tensord
