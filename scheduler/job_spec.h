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

// An SPMD request's ranks and per-rank inputs (API.md 8).
struct SpmdInput {
  std::vector<Tensor> per_rank;  // {"per_rank": [...]}: one per rank of the group, in its order
  Tensor shard;                  // {"shard": t, "dim": d}: split as torch.tensor_split
  int64_t dim = 0;
};
struct SpmdRequest {
  int count = 0;           // "ranks": R (the whole world, which must have R ranks)
  std::vector<int> ranks;  // "ranks": [r0, r1, ...] (a subgroup, in that order)
  std::map<std::string, SpmdInput> inputs;
  // A part forwarded by the world's coordinator ("spmd_part"): this
  // server runs these members of the group (indices into it), which meet
  // under `part_key`. Empty: the whole request (this server coordinates).
  std::vector<size_t> part_members;
  std::string part_key;
};

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
  // Set when the request says "ranks" (API.md 8): the program runs SPMD on
  // those ranks; `inputs` are then the replicated ones.
  std::optional<SpmdRequest> spmd;
  // The program as JSON and the caller's Authorization header: what a
  // coordinator forwards to the servers holding the group's other ranks.
  std::string program_json;
  std::string authorization;
  // What the tenant was charged for the request's body as it arrived
  // (HttpRequest::body_charge): held while the job holds its inputs, then
  // released with them (Engine::execute), or with the job if it never runs.
  std::shared_ptr<void> body_charge;
};

struct JobResult {
  std::string id;
  std::vector<std::pair<std::string, Tensor>> outputs;  // the returned ones
  double queue_ms = 0;
  double run_ms = 0;
  std::string partition;
  std::string program_sha256;
  std::string backend;
  // The backend's libraries and versions: the engine's one copy, shared by
  // every result (null: none to report).
  std::shared_ptr<const std::map<std::string, std::string>> libraries;
  int64_t plan_peak_bytes = 0;
  // An SPMD job's outputs (indexed like `outputs`): every rank's value of
  // an output that differs across ranks, in the group's order; empty for a
  // replicated one (its value is in `outputs`). Empty for other jobs.
  bool spmd = false;
  std::vector<std::vector<Tensor>> per_rank;
};

// POST /v1/graphs (API.md 4.3): what api/ parses a capture body into.
struct GraphCaptureRequest {
  Program program;
  std::map<std::string, TensorMeta> inputs;  // from "inputs", else the program's declared inputs
  std::string pool;                          // share the pool of this graph; empty: a new pool
  std::string name;                          // optional model name (API.md 11); empty: none
  std::string program_sha256;                // of the program as sent
  // "ranks": R or [r0, r1, ...] (API.md 8): an SPMD graph (count or ranks
  // set; no inputs). Inputs whose shapes differ across ranks are declared
  // {"per_rank": [{dtype, shape}, ...]}, one per rank of the group, in its
  // order; they are in `per_rank`, not in `inputs`.
  std::optional<SpmdRequest> spmd;
  std::map<std::string, std::vector<TensorMeta>> per_rank;
};

}  // namespace tensord
