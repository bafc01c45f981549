// Triton's system shared memory extension (API.md 11.1): POSIX shared memory
// regions a client on the same host registers, so that infer inputs and
// outputs move without the socket. Each region belongs to the tenant that
// registered it: another tenant's name is unknown to everything here, as
// if it did not exist. A key is a name under /dev/shm (one path segment,
// opened without following links, a regular file on tmpfs), never one of
// the names the server or its libraries make for themselves (nccl*, sem.*,
// tensord*), and one tenant's key cannot be registered by another while it
// is held. The region is read and written with pread/pwrite on its open
// descriptor, checked against the object's size at every use, so a client
// that truncates its object afterwards gets a 400, never a SIGBUS. A region
// unregistered while a request uses it is closed when that request lets go
// of it. Error messages echo only what the caller sent. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tensord {

struct ShmRegionStatus {
  std::string name;
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

// One registered region: its descriptor and its slice [offset, offset +
// byte_size) of the object. Closed on destruction.
class ShmRegion {
 public:
  ShmRegion(int fd, ShmRegionStatus status) : fd_(fd), status_(std::move(status)) {}
  ~ShmRegion();
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;

  const ShmRegionStatus& status() const { return status_; }
  // Copies `n` bytes at `at` (relative to the region's offset) out of / into
  // the region; bad_request naming the region when [at, at + n) is outside
  // it or past the object's current end.
  void read(uint64_t at, void* out, size_t n) const;
  void write(uint64_t at, const void* in, size_t n) const;

 private:
  void check(uint64_t at, size_t n) const;
  // pread (write = false) or pwrite `n` bytes at `at` through `buf`.
  void transfer(uint64_t at, char* buf, size_t n, bool write) const;
  int fd_;
  ShmRegionStatus status_;
};

class ShmRegistry {
 public:
  static constexpr size_t kMaxRegionsPerTenant = 256;

  // Registers `name` for `tenant`: bad_request for a name that is taken, a
  // key that is not an allowed shared memory name or cannot be opened, a
  // slice past the object's end; conflict when the tenant already has
  // `name`.
  void add(const std::string& tenant, const std::string& name, const std::string& key, uint64_t offset,
           uint64_t byte_size);
  // Unregisters one (unknown: nothing to do, as Triton answers) or all of the
  // tenant's regions.
  void remove(const std::string& tenant, const std::string& name);
  void remove_all(const std::string& tenant);
  // The tenant's regions by name; with `name`, that one (not_found if the
  // tenant has none by that name).
  std::vector<ShmRegionStatus> status(const std::string& tenant, const std::optional<std::string>& name) const;
  // The tenant's region `name`, held for the caller's use; null when unknown.
  std::shared_ptr<const ShmRegion> find(const std::string& tenant, const std::string& name) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<const ShmRegion>> regions_;  // (tenant, name)
};

// Whether `key` may name a region: "/" then 1-200 characters of
// [A-Za-z0-9_.-], not "." or "..", not a reserved prefix.
bool shm_key_allowed(const std::string& key);

}  // namespace tensord
