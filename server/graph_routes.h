// What the captured-graph routes share: /v1/graphs (routes_graphs.cpp) and
// KServe v2 inference over the same graphs (routes_kserve.cpp, API.md 11).
// One store, one replay path.
#pragma once

#include <functional>
#include <memory>

#include "scheduler/job.h"
#include "server/app.h"

namespace tensord {

class GraphStore;
struct CapturedGraph;

void add_graph_routes(Router& r, AppContext& app, const std::shared_ptr<GraphStore>& store);
void add_kserve_routes(Router& r, AppContext& app, const std::shared_ptr<GraphStore>& store);

// Queues a replay of `g` with `spec` (the one execution path of
// /v1/graphs/{id}/replay and /v2/models/{model}/infer): refuses a stored
// graph input (bad_request) and inputs of another shape or dtype than
// captured (conflict) before anything is queued; counts the replay when it
// succeeds, then calls `answer` with the ended job; a client that goes away
// cancels the job. A graph captured with ranks replays SPMD
// (Engine::replay_spmd_async); one captured without refuses SPMD inputs.
void start_graph_replay(AppContext& app, Tenant& tenant, const std::shared_ptr<CapturedGraph>& g, JobSpec spec,
                        const std::shared_ptr<AsyncReply>& reply, std::function<void(Job&)> answer);

}  // namespace tensord
