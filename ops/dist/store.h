// The rendezvous stores the ranks meet through (API.md 8: --rendezvous):
// an in-process one (ranks as threads), a directory shared by the servers
// of one host or filesystem, and a Redis server's across hosts. They are
// Gloo's (gloo::rendezvous::Store), since Gloo's context joins through one;
// NCCL's groups and the SPMD peers' addresses (server/spmd_peers_http.*)
// use the same store. Only this file's .cpp includes Gloo's headers, so a
// caller that only picks a store (server/main.cpp) stays free of them.
//
// Thread-safety: a store is shared by the ranks of a process; the hash and
// file stores lock inside, the Redis store holds one connection (one call
// at a time: its users serialise, as rank_workers does).
#pragma once

#include <memory>
#include <string>

namespace gloo::rendezvous {
class Store;
}

namespace tensord::dist {

std::shared_ptr<gloo::rendezvous::Store> make_hash_store();
std::shared_ptr<gloo::rendezvous::Store> make_file_store(const std::string& dir);
// Throws unavailable, naming host:port, when nothing accepts connections
// there.
std::shared_ptr<gloo::rendezvous::Store> make_redis_store(const std::string& host, int port);

// Whether the store holds `key` now (no wait).
bool store_has_key(gloo::rendezvous::Store& store, const std::string& key);
// A key's value written (once: a store may refuse a second write) and read.
void store_set(gloo::rendezvous::Store& store, const std::string& key, const std::string& value);
std::string store_get(gloo::rendezvous::Store& store, const std::string& key);

}  // namespace tensord::dist
