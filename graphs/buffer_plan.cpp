#include "graphs/buffer_plan.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace tensord {

BufferAssignment assign_buffers(const std::vector<BufferUse>& uses) {
  BufferAssignment a;
  a.buffer_of.assign(uses.size(), -1);
  std::vector<size_t> order(uses.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return uses[x].def < uses[y].def; });
  std::vector<int> free_list;        // buffer indices
  std::multimap<int, int> releases;  // last instruction -> buffer
  for (size_t i : order) {
    const BufferUse& u = uses[i];
    // Buffers whose last reader ran before this use's writer are free.
    while (!releases.empty() && releases.begin()->first < u.def) {
      free_list.push_back(releases.begin()->second);
      releases.erase(releases.begin());
    }
    int pick = -1;
    for (int b : free_list) {
      const size_t sz = a.sizes[static_cast<size_t>(b)];
      if (sz >= u.bytes && (pick < 0 || sz < a.sizes[static_cast<size_t>(pick)])) pick = b;
    }
    if (pick < 0) {
      for (int b : free_list) {
        if (pick < 0 || a.sizes[static_cast<size_t>(b)] > a.sizes[static_cast<size_t>(pick)]) pick = b;
      }
    }
    if (pick < 0) {
      pick = static_cast<int>(a.sizes.size());
      a.sizes.push_back(0);
    } else {
      free_list.erase(std::find(free_list.begin(), free_list.end(), pick));
    }
    a.sizes[static_cast<size_t>(pick)] = std::max(a.sizes[static_cast<size_t>(pick)], u.bytes);
    a.buffer_of[i] = pick;
    releases.emplace(std::max(u.last, u.def), pick);
  }
  return a;
}

}  // namespace tensord
