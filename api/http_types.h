// Transport-neutral HTTP request/response values. server/ converts Beast
// messages to and from these; handlers and api/ never see Beast.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tensord {

struct Caller;  // server/caller.h: who sent a request (a tenant, its lane)

// Where a released request body's string goes (server/body_pool.h keeps
// large ones resident for the next upload).
class BodyRecycler {
 public:
  virtual ~BodyRecycler() = default;
  virtual void recycle(std::string&& body) noexcept = 0;
};

// A JSON body's top-level "b64" value decoded while the body arrived
// (api/json_b64_stream.h): `size` bytes from `offset` (64-byte aligned) of
// `bytes`.
struct DecodedB64 {
  std::string bytes;
  size_t offset = 0;
  size_t size = 0;
};

struct HttpRequest {
  std::string method;                          // "GET", "PUT", ...
  std::string target;                          // raw request target ("/v1/tensors/a?x=1")
  std::string path;                            // percent-decoded path without the query
  std::map<std::string, std::string> query;    // decoded query parameters
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  // Set by the session: takes `body` back when the request (or the tensors
  // share_body() gave its bytes to) no longer needs it. Null: freed.
  std::shared_ptr<BodyRecycler> recycler;
  // A large top-level "b64" value the session decoded while the body
  // arrived (routes that ask for it): `body` then holds the JSON with "" in
  // the value's place.
  std::optional<DecodedB64> decoded_b64;
  // What the tenant was charged for the body while it was read (tensor
  // bodies, HttpServer::set_body_accounts): released with the request, by
  // the handler just before the stored tensors are charged instead, or
  // handed to the job the body's inputs go to (JobSpec::body_charge).
  std::shared_ptr<void> body_charge;
  std::string request_id;
  // The tenant the request authenticated as (server/auth.h writes it, the
  // session's log line reads it): shared, so it outlives a moved request.
  std::shared_ptr<std::string> caller = std::make_shared<std::string>();
  // Who sent it, resolved by the session from the headers
  // (server/caller.h); null outside a session (authenticate resolves then).
  std::shared_ptr<const Caller> who;
  // Filled by the router: route template and its {params}.
  std::string route;
  std::map<std::string, std::string> params;

  HttpRequest() = default;
  HttpRequest(HttpRequest&&) = default;
  HttpRequest& operator=(HttpRequest&&) = default;
  HttpRequest(const HttpRequest&) = default;
  HttpRequest& operator=(const HttpRequest&) = default;
  ~HttpRequest() {
    if (recycler && !body.empty()) recycler->recycle(std::move(body));
    if (recycler && decoded_b64 && !decoded_b64->bytes.empty()) recycler->recycle(std::move(decoded_b64->bytes));
  }

  // Moves the body out, shared read-only (tensors parsed from it view its
  // bytes): the last owner's release hands the string to `recycler`.
  std::shared_ptr<const std::string> share_body() { return share(std::move(body)); }
  // The same for another of the request's strings (decoded_b64->bytes).
  std::shared_ptr<const std::string> share(std::string&& str) {
    if (!recycler) return std::make_shared<const std::string>(std::move(str));
    std::weak_ptr<BodyRecycler> to = recycler;
    auto owned = std::make_unique<std::string>(std::move(str));
    return {owned.release(), [to](const std::string* p) {
              std::unique_ptr<std::string> s(const_cast<std::string*>(
                  p));  // NOLINT(cppcoreguidelines-pro-type-const-cast): ours, made non-const above
              if (auto r = to.lock()) r->recycle(std::move(*s));
            }};
  }

  const std::string& header(const std::string& lower_name) const {
    static const std::string kEmpty;
    auto it = headers.find(lower_name);
    return it == headers.end() ? kEmpty : it->second;
  }
};

// A memory range written as part of a response body without being copied
// (a tensor's bytes), kept alive by `owner` until the write ends.
struct BodyView {
  const void* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;
  // When set (and `data` null), the bytes are made as they are sent (a
  // tensor's base64, api/json_writer.h): fill(at, out, n) writes bytes
  // [at, at + n) of the view to `out`; `at` is a multiple of kFillAlign.
  std::function<void(size_t at, char* out, size_t n)> fill;
  static constexpr size_t kFillAlign = 4;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  // The body: `body`, then each of `views` in order.
  std::string body;
  std::vector<BodyView> views;
  std::vector<std::pair<std::string, std::string>> headers;

  size_t body_size() const {
    size_t n = body.size();
    for (const auto& v : views) n += v.size;
    return n;
  }
};

}  // namespace tensord
