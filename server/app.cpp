#include "server/app.h"

#include "api/safetensors.h"
#include "ops/error.h"
#include "scheduler/job_handle.h"
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

}  // namespace tensord
