// POST /v1/run: a program, run now, answered when it ends (API.md 4.1);
// POST /v1/jobs, GET /v1/jobs/{id}, DELETE /v1/jobs/{id}: the same, async.
// JSON body, or a safetensors body whose __metadata__["request"] holds the
// JSON request and whose tensors are the inputs.
#include <memory>
#include <optional>

#include "api/json_tensor.h"
#include "api/program_json.h"
#include "api/safetensors.h"
#include "ops/error.h"
#include "scheduler/engine.h"
#include "scheduler/job.h"
#include "scheduler/job_table.h"
#include "scheduler/tenant.h"
#include "server/auth.h"
#include "server/app.h"

namespace tensord {

namespace {
// A /v1/run or /v1/jobs body (JSON, or safetensors with the request in
// __metadata__["request"]) as a typed JobSpec.
JobSpec parse_job_request(HttpRequest& req) {
  JobSpec spec;
  if (is_safetensors_body(req)) {
    auto body = req.share_body();
    SafetensorsFile f = parse_safetensors(body);
    auto it = f.metadata.find("request");
    if (it == f.metadata.end())
      throw Error(ErrorCode::kBadRequest, "safetensors request without __metadata__[\"request\"]");
    std::map<std::string, Tensor> inputs;
    for (auto& [name, t] : f.tensors) inputs.emplace(name, std::move(t));
    spec = job_spec_from_json_text(it->second, "__metadata__.request", std::move(inputs));
  } else {
    spec = job_spec_from_json_body(req.body);
  }
  spec.request_id = req.request_id;
  spec.body_charge = std::move(req.body_charge);  // held while the job holds its inputs
  // An SPMD request over ranks of other servers is forwarded with the
  // caller's credentials (server/spmd_peers_http.h).
  if (spec.spmd) spec.authorization = req.header("authorization");
  return spec;
}

std::shared_ptr<Job> find_job(AppContext& app, HttpRequest& req, const Tenant& tenant) {
  auto job = app.jobs->find(tenant.name, req.params.at("id"));
  if (!job) throw Error(ErrorCode::kNotFound, "job '" + req.params.at("id") + "' not found");
  return job;
}
// The tensors of a safetensors reply: each output by its name; an SPMD
// output that differs across ranks as "<name>/<i>", i its index in the
// group (the JSON header's outputs say which).
std::vector<std::pair<std::string, Tensor>> reply_tensors(const JobResult& r) {
  if (!r.spmd) return r.outputs;
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t k = 0; k < r.outputs.size(); ++k) {
    if (r.per_rank[k].empty()) {
      out.push_back(r.outputs[k]);
      continue;
    }
    for (size_t i = 0; i < r.per_rank[k].size(); ++i) {
      out.emplace_back(r.outputs[k].first + "/" + std::to_string(i), r.per_rank[k][i]);
    }
  }
  return out;
}
}  // namespace

void answer_job(Job& job, const std::shared_ptr<AsyncReply>& reply, bool safetensors, bool b64) {
  answer_job_with(job, reply, [safetensors, b64](const JobResult& res) {
    if (safetensors)
      return safetensors_response(reply_tensors(res), {{"response", job_result_to_json(res, false, false)}});
    HttpResponse resp;
    resp.views = job_result_to_json_body(res, b64);
    return resp;
  });
}

void add_run_routes(Router& r, AppContext& app) {
  // Answered from the job's end (no thread waits on it); a client that goes
  // away cancels the job (499). The io thread parses and compiles bodies up
  // to 8 KiB (~0.2 ms of work at most); larger programs go to the pool.
  constexpr size_t kRunInlineBody = 8 << 10;
  r.add_async(
      "POST", "/v1/run",
      [&app](HttpRequest& req, const std::shared_ptr<AsyncReply>& reply) {
        Tenant& tenant = request_tenant(req);
        const bool st = wants_safetensors(req), b64 = b64_requested(req);
        std::shared_ptr<Job> job = app.engine->run_async(tenant, parse_job_request(req),
                                                         [reply, st, b64](Job& j) { answer_job(j, reply, st, b64); });
        cancel_when_client_goes(reply, job);
      },
      kRunInlineBody, BodyKind::kCharged);

  add_offloaded(
      r, "POST", "/v1/jobs",
      [&app](HttpRequest& req) {
        Tenant& tenant = request_tenant(req);
        std::shared_ptr<Job> job = app.engine->submit(tenant, parse_job_request(req));
        app.jobs->add(job);
        HttpResponse resp = json_response(202, job_accepted_to_json(job->id()));
        resp.headers.emplace_back("Location", "/v1/jobs/" + job->id());
        return resp;
      },
      BodyKind::kCharged);

  add_offloaded(r, "GET", "/v1/jobs/{id}", [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    std::shared_ptr<Job> job = find_job(app, req, tenant);  // 404 before 400, as the other routes answer
    return json_response(200, job_status_to_json(*job, b64_requested(req)));
  });

  r.add("DELETE", "/v1/jobs/{id}", [&app](HttpRequest& req) {
    Tenant& tenant = request_tenant(req);
    auto job = find_job(app, req, tenant);
    // A queued job ends now; a running one stops at its next node boundary.
    job->cancel("cancelled by the client");
    return json_response(200, job_status_to_json(*job, false));
  });
}

}  // namespace tensord
