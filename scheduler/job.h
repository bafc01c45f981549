// Typed job request and result: what api/ parses a /v1/run body into. No JSON.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graphs/program.h"
#include "ops/tensor.h"

namespace tensord {

struct JobSpec {
  Program program;
  std::string program_sha256;  // of the program as sent
  std::map<std::string, Tensor> inputs;
  std::map<std::string, std::string> store;  // output name -> stored name
  std::optional<std::vector<std::string>> return_names;
  int64_t deadline_ms = 0;  // 0: none
  int priority = 0;
  std::string graph_id;    // set for a captured graph's replay: trace spans carry it
  std::string request_id;  // the request that submitted it (the job's log line)
};

struct JobResult {
  std::string id;
  std::vector<std::pair<std::string, Tensor>> outputs;  // the returned ones
  double queue_ms = 0;
  double run_ms = 0;
  std::string partition;
  std::string program_sha256;
  std::string backend;
  std::map<std::string, std::string> libraries;
  int64_t plan_peak_bytes = 0;
};

}  // namespace tensord
