#include "scheduler/spmd/spmd_keys.h"

#include <chrono>
#include <random>

namespace tensord {

SpmdKeys::SpmdKeys()
    : boot_id_(std::random_device{}() ^
               static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count())) {}

std::string SpmdKeys::key(const std::string& group, bool replace) {
  std::lock_guard lk(mu_);
  uint64_t& gen = generation_[group];
  if (replace) ++gen;
  return group + "#" + std::to_string(boot_id_) + "." + std::to_string(gen);
}

}  // namespace tensord
