// The bodies of Triton's KServe extensions that tritonclient, perf_analyzer
// and Model Analyzer call (API.md 11.1): model configuration, statistics,
// the repository index. Typed values in, JSON text out (and the index's
// optional request body in); JSON stays in api/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/kserve_json.h"

namespace tensord {

// GET /v2/models/{model}/config: Triton's ModelConfig as its JSON mapping
// (name, platform and backend "tensord", max_batch_size 0, input/output
// with data_type TYPE_* and dims, decoupled false, one instance group named
// after the tenant's partition: KIND_GPU on a device, else KIND_CPU).
std::string kserve_model_config_json(const KServeModel& m, const std::string& partition, bool gpu);

// One model's figures for GET /v2/models[/{model}]/stats (ModelStats read
// once). Durations are nanoseconds.
struct KServeDurationStat {
  uint64_t count = 0;
  uint64_t ns = 0;
};
struct KServeModelStats {
  std::string name;
  int64_t last_inference_ms = 0;
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  KServeDurationStat success, fail, queue, compute_input, compute_infer, compute_output;
};
// {model_stats: [{name, version: "1", last_inference, inference_count,
// execution_count, inference_stats: {success, fail, queue, compute_input,
// compute_infer, compute_output, cache_hit, cache_miss}: {count, ns},
// batch_stats: [], memory_usage: []}]}
std::string kserve_model_stats_json(const std::vector<KServeModelStats>& models);

// POST /v2/repository/index: [{name, version: "1", state: "READY"}].
std::string kserve_repository_index_json(const std::vector<std::string>& names);
// The index's body: empty, or {"ready": bool} (other members ignored, as
// Triton does); true when it asks for ready models only. Anything else is
// bad_request.
bool kserve_repository_index_ready_only(const std::string& body);

// The system shared memory extension's bodies: a region's registration
// {key, offset?, byte_size} (bad_request for anything else: a missing or
// non-string key, negative numbers, unknown members), and the status
// [{name, key, offset, byte_size}].
struct KServeShmRegion {
  std::string name;
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};
KServeShmRegion kserve_shm_register_from_json(const std::string& body);
std::string kserve_shm_status_json(const std::vector<KServeShmRegion>& regions);

}  // namespace tensord
