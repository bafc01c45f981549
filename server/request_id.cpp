#include "server/request_id.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <thread>

namespace tensord {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t thread_seed() {
  static std::atomic<uint64_t> counter{0};
  uint64_t seed = std::random_device{}();
  seed = (seed << 32) ^ std::random_device{}();
  seed ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  seed ^= std::hash<std::thread::id>{}(std::this_thread::get_id()) * 0x9e3779b97f4a7c15ull;
  seed += counter.fetch_add(1) * 0xd1b54a32d192ed03ull;
  return seed;
}

}  // namespace

bool is_sane_request_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

std::string new_request_id() {
  thread_local uint64_t state = thread_seed();
  uint64_t v = splitmix64(state);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[i] = kHex[v & 15];
    v >>= 4;
  }
  return out;
}

std::string request_id_for(std::string_view client_id) {
  return is_sane_request_id(client_id) ? std::string(client_id) : new_request_id();
}

}  // namespace tensord
