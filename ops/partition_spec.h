// A scheduler partition (API.md 9), the one type for it: what the config
// file declares (api/config_json.cpp), what the scheduler queues on
// (scheduler/fair_queue.h) and what a backend splits its device into
// (Backend::set_partitions; CUDA: a green context each). A plain value;
// it lives in ops/ because the backend, the lowest layer, takes it.
#pragma once

#include <string>

namespace tensord {

struct PartitionSpec {
  std::string name;
  double share = 1.0;       // fraction of the device (SMs on CUDA, cores on CPU)
  int workqueue_limit = 2;  // most jobs running at once (the config file's default)
};

}  // namespace tensord
