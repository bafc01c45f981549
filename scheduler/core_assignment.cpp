#include "scheduler/core_assignment.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <thread>

namespace tensord {

std::vector<std::vector<int>> assign_cores(const std::vector<PartitionSpec>& partitions, int cores) {
  cores = std::max(cores, 1);
  std::vector<std::vector<int>> out;
  int cursor = 0;
  for (const auto& p : partitions) {
    const int n = std::clamp(static_cast<int>(std::lround(p.share * cores)), 1, cores);
    std::vector<int> mine;
    mine.reserve(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) mine.push_back((cursor + k) % cores);
    std::sort(mine.begin(), mine.end());
    cursor = (cursor + n) % cores;
    out.push_back(std::move(mine));
  }
  return out;
}

std::vector<int> allowed_cpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) out.push_back(c);
    }
  }
  if (out.empty()) {
    const int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int c = 0; c < n; ++c) out.push_back(c);
  }
  return out;
}

std::vector<int> to_physical(const std::vector<int>& logical, const std::vector<int>& allowed) {
  std::vector<int> out;
  if (allowed.empty()) return out;
  for (int l : logical) out.push_back(allowed[static_cast<size_t>(l) % allowed.size()]);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace tensord
