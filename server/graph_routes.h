// What the captured-graph routes share: /v1/graphs (routes_graphs.cpp) and
// KServe v2 inference over the same graphs (routes_kserve.cpp, API.md 11).
// One graph service, one replay path.
#pragma once

#include <functional>
#include <memory>

#include "scheduler/job_spec.h"
#include "server/app.h"

namespace tensord {

struct CapturedGraph;

// Both over app.graphs (scheduler/graph_service.h).
void add_graph_routes(Router& r, AppContext& app);
void add_kserve_routes(Router& r, AppContext& app);
// Triton's system shared memory extension (routes_shm.cpp, over app.shm).
void add_shm_routes(Router& r, AppContext& app);

// Queues a replay of `g` with `spec` (the one execution path of
// /v1/graphs/{id}/replay and /v2/models/{model}/infer:
// GraphService::replay_async), then calls `answer` with the ended job; a
// client that goes away cancels the job.
void start_graph_replay(AppContext& app, Tenant& tenant, const std::shared_ptr<CapturedGraph>& g, JobSpec spec,
                        const std::shared_ptr<AsyncReply>& reply, std::function<void(Job&)> answer);

}  // namespace tensord
