#include "ops/dist/store.h"

#include <gloo/common/error.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/redis_store.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <vector>

#include "ops/dist/named_store.h"
#include "ops/error.h"

namespace tensord::dist {

std::shared_ptr<gloo::rendezvous::Store> make_hash_store() {
  return std::make_shared<gloo::rendezvous::HashStore>();
}

std::shared_ptr<gloo::rendezvous::Store> make_file_store(const std::string& dir) {
  return std::make_shared<NamedStore>(std::make_shared<gloo::rendezvous::FileStore>(dir), "file://" + dir);
}

namespace {
// Whether something accepts TCP connections at host:port. Gloo's
// RedisStore leaks its hiredis context when it cannot connect (it throws
// without freeing it): an unreachable address is refused before it.
bool accepts_connections(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return false;
  bool ok = false;
  for (addrinfo* a = res; a && !ok; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    ok = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    close(fd);
  }
  freeaddrinfo(res);
  return ok;
}

}  // namespace

std::shared_ptr<gloo::rendezvous::Store> make_redis_store(const std::string& host, int port) {
  const std::string name = "redis://" + host + ":" + std::to_string(port);
  if (!accepts_connections(host, port)) {
    throw Error(ErrorCode::kUnavailable, "rendezvous store " + name + ": nothing accepts connections there");
  }
  std::shared_ptr<gloo::rendezvous::Store> redis;
  try {
    redis = std::make_shared<gloo::rendezvous::RedisStore>(host, port);
  } catch (const std::exception& e) {
    throw_store_failure(name, e);
  }
  return std::make_shared<NamedStore>(std::move(redis), name);
}

bool store_has_key(gloo::rendezvous::Store& store, const std::string& key) {
  if (auto* n = dynamic_cast<NamedStore*>(&store)) {
    try {
      return store_has_key(n->inner(), key);
    } catch (const std::exception& e) {
      n->fail(e);
    }
  }
  if (auto* r = dynamic_cast<gloo::rendezvous::RedisStore*>(&store)) return r->check({key});
  try {
    store.wait({key}, std::chrono::milliseconds(1));
    return true;
  } catch (const gloo::IoException&) {
    return false;  // not there within the wait (a lost connection: Redis's check above throws)
  }
}

void store_set(gloo::rendezvous::Store& store, const std::string& key, const std::string& value) {
  store.set(key, std::vector<char>(value.begin(), value.end()));
}

std::string store_get(gloo::rendezvous::Store& store, const std::string& key) {
  std::vector<char> v = store.get(key);
  return std::string(v.begin(), v.end());
}

}  // namespace tensord::dist
