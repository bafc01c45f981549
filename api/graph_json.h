// Graph capture and replay bodies (API.md 4.3) and GET /v1/graphs/{id}.
// JSON stays in api/: callers get typed values.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rapidjson/document.h>

#include "graphs/graph_store.h"
#include "graphs/program.h"
#include "scheduler/job_spec.h"

namespace tensord {

// {program, inputs?: {name: {dtype, shape} | {per_rank: [...]}}, pool?: "<graph id>", name?, ranks?}.
// A name is 1..128 of [A-Za-z0-9_.-], not only dots (a path segment "..")
// and not shaped like a graph id ("g-" and digits), which it would shadow.
GraphCaptureRequest graph_capture_from_json(const rapidjson::Value& req);

// {inputs, store?, return?, deadline_ms?, priority?}: a JobSpec without a
// program. `file_inputs` came in a safetensors body.
JobSpec graph_replay_from_json(const rapidjson::Value& req, std::map<std::string, Tensor> file_inputs);

// The same from bytes (routes hold no document): a capture body; a replay's
// JSON body (parsed in place); a safetensors replay's request text (none:
// as `{}`), `what` naming it in errors.
GraphCaptureRequest graph_capture_from_body(std::string_view body);
JobSpec graph_replay_from_json_body(std::string& body);
JobSpec graph_replay_from_json_text(std::optional<std::string_view> request, const char* what,
                                    std::map<std::string, Tensor> file_inputs);

// {id, name, nodes, bytes, replays, is_capturing, pool}; name null when unset;
// an SPMD graph's also "ranks" (its group's global ranks) and "group".
std::string graph_info_to_json(const GraphInfo& info);

}  // namespace tensord
