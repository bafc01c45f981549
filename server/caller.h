// Who sent a request, resolved once from its Authorization header as soon
// as the headers are read (HttpServer::set_callers): the tenant, the lane
// its decoding and encoding run on, and the memory account its body is
// charged to as it arrives. The session hands it to the lane move, the
// body accounting, the offloaded work and the routes (HttpRequest::who),
// so a token is hashed and looked up once per request. A request is
// authenticated as of its headers: a config reload while its body arrives
// does not change who sent it.
#pragma once

#include <memory>
#include <string>

namespace tensord {

class MemoryAccount;
struct Tenant;

struct Caller {
  // Null: the header names no tenant (missing, malformed, unknown token),
  // `why` says which; routes that authenticate answer 401 with it.
  Tenant* tenant = nullptr;
  std::string why;
  std::string lane;                        // the tenant's partition; "" for none
  std::shared_ptr<MemoryAccount> account;  // the tenant's; null for none
};

}  // namespace tensord
