#include "server/app.h"

#include <optional>

#include "api/safetensors.h"
#include "ops/error.h"
#include "scheduler/engine.h"
#include "scheduler/job.h"
#include "server/auth.h"
#include "server/graph_routes.h"
#include "server/routes_openapi.h"

namespace tensord {

HttpResponse json_response(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse safetensors_response(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  SafetensorsParts parts = encode_safetensors_parts(tensors, metadata);
  HttpResponse r;
  r.content_type = "application/vnd.safetensors";
  r.body = std::move(parts.header);
  for (const Tensor& t : parts.data) {
    if (t.nbytes()) r.views.push_back(BodyView{t.data(), t.nbytes(), t.storage(), {}});
  }
  return r;
}

void cancel_when_client_goes(const std::shared_ptr<AsyncReply>& reply, const std::shared_ptr<Job>& job) {
  std::weak_ptr<Job> weak = job;
  reply->on_client_gone([weak] {
    if (auto j = weak.lock()) j->cancel("the client closed the connection");
  });
}

bool wants_safetensors(const HttpRequest& req) {
  return req.header("accept").find("application/vnd.safetensors") != std::string::npos;
}

bool b64_requested(const HttpRequest& req) {
  auto enc = req.query.find("encoding");
  if (enc == req.query.end()) return false;
  if (enc->second == "b64") return true;
  throw Error(ErrorCode::kBadRequest, "unknown encoding '" + enc->second.substr(0, 64) + "' (the one encoding is b64)");
}

bool is_safetensors_body(const HttpRequest& req) {
  return req.header("content-type").rfind("application/vnd.safetensors", 0) == 0;
}

std::shared_ptr<Router> build_router(AppContext& app) {
  auto r = std::make_shared<Router>();
  // Every route but health, metrics and the spec is the tenant's: the
  // router checks the token before the handler runs (API.md 9).
  r->set_authenticator([&app](HttpRequest& req) { authenticate_request(req, *app.tenants); });
  add_info_routes(*r, app);
  add_tensor_routes(*r, app);
  add_run_routes(*r, app);
  add_admin_routes(*r, app);
  add_graph_routes(*r, app);
  add_kserve_routes(*r, app);
  if (app.shm) add_shm_routes(*r, app);
  add_observability_routes(*r, app);
  add_openapi_routes(*r);
  return r;
}

void answer_job_with(Job& job, const std::shared_ptr<AsyncReply>& reply,
                     std::function<HttpResponse(const JobResult&)> encode, bool costly, std::function<void()> failed) {
  std::shared_ptr<const JobResult> res;
  std::optional<Error> err;
  try {
    res = Engine::shared_result_of(job);
  } catch (const Error& e) {
    err = e;
  }
  size_t bytes = 0;
  if (res) {
    for (const auto& [name, t] : res->outputs) bytes += t.nbytes();
    for (const auto& each : res->per_rank) {
      for (const Tensor& t : each) bytes += t.nbytes();
    }
  }
  constexpr size_t kInlineEncodeBytes = 16 << 10;  // more: encode on the handler pool (JSON text of 4k floats)
  const size_t inline_bytes = costly ? kInlineEncodeBytes / 4 : kInlineEncodeBytes;
  reply->finish(bytes > inline_bytes,
                [res = std::move(res), err = std::move(err), encode = std::move(encode), failed = std::move(failed)] {
                  if (err) {
                    if (failed) failed();
                    throw *err;
                  }
                  return encode(*res);
                });
}

}  // namespace tensord
