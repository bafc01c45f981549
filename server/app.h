// The application: what route handlers share (engine, tenants, options) and
// the function that registers every route on a Router. JSON stays here and
// in api/; handlers turn bodies into typed values and call the engine.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/tensor.h"
#include "server/router.h"

namespace tensord {

class Engine;
class Job;
struct JobResult;
struct Tenant;
class TenantRegistry;
class JobTable;
class Checkpointer;
class GraphService;
class ShmRegistry;

struct AppContext {
  Engine* engine = nullptr;
  TenantRegistry* tenants = nullptr;
  JobTable* jobs = nullptr;        // async jobs (POST /v1/jobs)
  GraphService* graphs = nullptr;  // captured graphs (/v1/graphs, KServe /v2)
  ShmRegistry* shm = nullptr;      // system shared memory regions (KServe /v2/systemsharedmemory)
  std::string version;
  Checkpointer* checkpointer = nullptr;  // POST /v1/checkpoint (off without --state-dir)
  size_t max_body_bytes = 0;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::function<bool()> draining;  // readiness
};

// Registers every route of API.md that this build serves.
void add_info_routes(Router& r, AppContext& app);
void add_tensor_routes(Router& r, AppContext& app);
void add_run_routes(Router& r, AppContext& app);
void add_admin_routes(Router& r, AppContext& app);
// add_graph_routes and add_kserve_routes: server/graph_routes.h
// GET /v1/trace; GET /v1/stream without Upgrade (426). routes_observability.cpp
void add_observability_routes(Router& r, AppContext& app);

std::shared_ptr<Router> build_router(AppContext& app);

// Registers a handler that may block (waits on a job, encodes a large
// tensor): it runs on the handler pool, not on an io thread
// (Router::add_offloaded: an asynchronous route answered by its return).
inline void add_offloaded(Router& r, std::string method, const std::string& tmpl, Handler h,
                          BodyKind body_kind = BodyKind::kOther) {
  r.add_offloaded(std::move(method), tmpl, std::move(h), body_kind);
}

// Answers an asynchronous /v1/run or replay from its job's end (call it in
// the job's done callback): the outputs as JSON (base64 when `b64`) or a
// safetensors body, or the job's error. Large outputs are encoded on the
// handler pool, small ones on the connection's io thread.
void answer_job(Job& job, const std::shared_ptr<AsyncReply>& reply, bool safetensors, bool b64);

// What every job-answering route shares (run, replay, KServe infer): the
// result taken from the ended job, then `encode(result)` builds the
// answer, on the connection's io thread for a small result and on the
// handler pool (the tenant's lane) past 16 KiB of tensors (4 KiB when
// `costly`: a compressed answer). A failed job is answered with its error;
// `failed` (may be null) hears of it first, where the answer is built.
void answer_job_with(Job& job, const std::shared_ptr<AsyncReply>& reply,
                     std::function<HttpResponse(const JobResult&)> encode, bool costly = false,
                     std::function<void()> failed = nullptr);

// A job started for a request: cancelled when its client goes away before
// the answer (499 for /v1/run; a queued capture never runs).
void cancel_when_client_goes(const std::shared_ptr<AsyncReply>& reply, const std::shared_ptr<Job>& job);

// Helpers shared by the route files.
HttpResponse json_response(int status, std::string body);
// A safetensors response written from the tensors' own memory (no copy of
// their bytes): the header, then a view of each tensor.
HttpResponse safetensors_response(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                  const std::map<std::string, std::string>& metadata);
bool wants_safetensors(const HttpRequest& req);
// Whether `?encoding=b64` asks for tensors' data as base64. Any other value
// throws Error(kBadRequest): a misspelt encoding answered as plain JSON would
// look like success and cost the client a body several times larger.
bool b64_requested(const HttpRequest& req);
bool is_safetensors_body(const HttpRequest& req);

}  // namespace tensord
