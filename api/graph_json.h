// Graph capture and replay bodies (API.md 4.3) and GET /v1/graphs/{id}.
// JSON stays in api/: callers get typed values.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "graphs/graph_store.h"
#include "graphs/program.h"
#include "scheduler/job.h"

namespace tensord {

struct GraphCaptureRequest {
  Program program;
  std::map<std::string, TensorMeta> inputs;  // from "inputs", else the program's declared inputs
  std::string pool;                          // share the pool of this graph; empty: a new pool
  std::string name;                          // optional model name (API.md 11); empty: none
  // "ranks": R or [r0, r1, ...] (API.md 8): an SPMD graph (count or ranks
  // set; no inputs). Inputs whose shapes differ across ranks are declared
  // {"per_rank": [{dtype, shape}, ...]}, one per rank of the group, in its
  // order; they are in `per_rank`, not in `inputs`.
  std::optional<SpmdRequest> spmd;
  std::map<std::string, std::vector<TensorMeta>> per_rank;
};

// {program, inputs?: {name: {dtype, shape} | {per_rank: [...]}}, pool?: "<graph id>", name?, ranks?}.
// A name is 1..128 of [A-Za-z0-9_.-], not only dots (a path segment "..")
// and not shaped like a graph id ("g-" and digits), which it would shadow.
GraphCaptureRequest graph_capture_from_json(const rapidjson::Value& req);

// {inputs, store?, return?, deadline_ms?, priority?}: a JobSpec without a
// program. `file_inputs` came in a safetensors body.
JobSpec graph_replay_from_json(const rapidjson::Value& req, std::map<std::string, Tensor> file_inputs);

// {id, name, nodes, bytes, replays, is_capturing, pool}; name null when unset;
// an SPMD graph's also "ranks" (its group's global ranks) and "group".
std::string graph_info_to_json(const GraphInfo& info);

}  // namespace tensord
