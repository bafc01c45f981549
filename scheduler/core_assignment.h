// Which CPU cores each partition's threads are pinned to (API.md section 9:
// on CPU a partition is worker threads pinned to its cores).
#pragma once

#include <vector>

#include "scheduler/scheduling_spec.h"

namespace tensord {

// Logical cores in [0, cores) for each partition, in order. A partition gets
// clamp(round(share * cores), 1, cores) cores; ranges are disjoint while
// cores last, then wrap around so partitions share cores round-robin.
std::vector<std::vector<int>> assign_cores(const std::vector<PartitionSpec>& partitions, int cores);

// The CPU ids this process may run on (sched_getaffinity), ascending;
// 0 .. hardware_concurrency-1 when that fails.
std::vector<int> allowed_cpus();

// Maps logical core i to allowed[i % allowed.size()]; sorted, no duplicates.
std::vector<int> to_physical(const std::vector<int>& logical, const std::vector<int>& allowed);

}  // namespace tensord
