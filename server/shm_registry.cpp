#include "server/shm_registry.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ops/error.h"

namespace tensord {
namespace {

[[noreturn]] void bad(const std::string& msg) {
  throw Error(ErrorCode::kBadRequest, msg);
}

std::string quoted(const std::string& s) {
  return "'" + s.substr(0, 200) + (s.size() > 200 ? "...'" : "'");
}

// The names NCCL, glibc's POSIX semaphores and the server itself make
// under /dev/shm.
constexpr const char* kReservedPrefixes[] = {"nccl", "sem.", "tensord", "psm_", "open_mpi", "vader", "cuda"};

}  // namespace

bool shm_key_allowed(const std::string& key) {
  if (key.size() < 2 || key.size() > 201 || key[0] != '/') return false;
  const std::string name = key.substr(1);
  if (name == "." || name == "..") return false;
  for (char c : name) {
    const bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  for (const char* p : kReservedPrefixes) {
    if (name.rfind(p, 0) == 0) return false;
  }
  return true;
}

ShmRegion::~ShmRegion() {
  if (fd_ >= 0) ::close(fd_);
}

void ShmRegion::check(uint64_t at, size_t n) const {
  if (at > status_.byte_size || n > status_.byte_size - at) {
    bad("shared memory region " + quoted(status_.name) + ": " + std::to_string(n) + " bytes at offset " +
        std::to_string(at) + " are outside its " + std::to_string(status_.byte_size) + " bytes");
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || static_cast<uint64_t>(st.st_size) < status_.offset + at + n) {
    bad("shared memory region " + quoted(status_.name) + ": its object is now smaller than the registered " +
        std::to_string(status_.offset + status_.byte_size) + " bytes");
  }
}

void ShmRegion::transfer(uint64_t at, char* buf, size_t n, bool write) const {
  check(at, n);
  uint64_t pos = status_.offset + at;
  while (n > 0) {
    const ssize_t k =
        write ? ::pwrite(fd_, buf, n, static_cast<off_t>(pos)) : ::pread(fd_, buf, n, static_cast<off_t>(pos));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      bad("shared memory region " + quoted(status_.name) + (write ? ": could not be written" : ": could not be read") +
          " (the object shrank?)");
    }
    buf += k;
    pos += static_cast<uint64_t>(k);
    n -= static_cast<size_t>(k);
  }
}

void ShmRegion::read(uint64_t at, void* out, size_t n) const {
  transfer(at, static_cast<char*>(out), n, false);
}

void ShmRegion::write(uint64_t at, const void* in, size_t n) const {
  // pwrite only reads `buf`.
  transfer(at, const_cast<char*>(static_cast<const char*>(in)), n,
           true);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
}

void ShmRegistry::add(const std::string& tenant, const std::string& name, const std::string& key, uint64_t offset,
                      uint64_t byte_size) {
  if (name.empty() || name.size() > 256) bad("a region name must be 1 to 256 characters");
  if (!shm_key_allowed(key)) {
    bad("key " + quoted(key) +
        " is not a shared memory name a region may use: '/' then letters, digits, '_', '.', '-' (names the "
        "server or its libraries make are refused)");
  }
  if (byte_size == 0) bad("byte_size must be positive");
  if (offset > (uint64_t{1} << 62) || byte_size > (uint64_t{1} << 62)) bad("offset and byte_size are too large");
  {
    std::lock_guard lk(mu_);
    if (regions_.contains({tenant, name})) {
      throw Error(ErrorCode::kConflict, "shared memory region " + quoted(name) + " is already registered");
    }
    size_t mine = 0;
    for (const auto& [k, r] : regions_) {
      if (k.first == tenant) ++mine;
      if (k.first != tenant && r->status().key == key) bad("key " + quoted(key) + " cannot be registered");
    }
    if (mine >= kMaxRegionsPerTenant) {
      bad("a tenant may register at most " + std::to_string(kMaxRegionsPerTenant) + " shared memory regions");
    }
  }
  const std::string path = "/dev/shm" + key;
  const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    bad("key " + quoted(key) + " cannot be opened as a shared memory object: " + std::strerror(errno));
  }
  auto region = std::make_shared<const ShmRegion>(fd, ShmRegionStatus{name, key, offset, byte_size});
  struct stat st {};
  struct statfs fs {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || ::fstatfs(fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC) {
    bad("key " + quoted(key) + " is not a shared memory object");
  }
  if (static_cast<uint64_t>(st.st_size) < offset + byte_size) {
    bad("shared memory region " + quoted(name) + ": offset " + std::to_string(offset) + " + byte_size " +
        std::to_string(byte_size) + " is past the end of its object (" + std::to_string(st.st_size) + " bytes)");
  }
  std::lock_guard lk(mu_);
  if (!regions_.emplace(std::make_pair(tenant, name), std::move(region)).second) {
    throw Error(ErrorCode::kConflict, "shared memory region " + quoted(name) + " is already registered");
  }
}

void ShmRegistry::remove(const std::string& tenant, const std::string& name) {
  std::shared_ptr<const ShmRegion> gone;  // closed outside the lock (or by its last user)
  std::lock_guard lk(mu_);
  auto it = regions_.find({tenant, name});
  if (it == regions_.end()) return;
  gone = std::move(it->second);
  regions_.erase(it);
}

void ShmRegistry::remove_all(const std::string& tenant) {
  std::vector<std::shared_ptr<const ShmRegion>> gone;
  std::lock_guard lk(mu_);
  for (auto it = regions_.lower_bound({tenant, std::string()}); it != regions_.end() && it->first.first == tenant;) {
    gone.push_back(std::move(it->second));
    it = regions_.erase(it);
  }
}

std::vector<ShmRegionStatus> ShmRegistry::status(const std::string& tenant,
                                                 const std::optional<std::string>& name) const {
  std::lock_guard lk(mu_);
  std::vector<ShmRegionStatus> out;
  if (name) {
    auto it = regions_.find({tenant, *name});
    if (it == regions_.end()) {
      throw Error(ErrorCode::kNotFound, "unknown shared memory region " + quoted(*name));
    }
    out.push_back(it->second->status());
    return out;
  }
  for (auto it = regions_.lower_bound({tenant, std::string()}); it != regions_.end() && it->first.first == tenant;
       ++it) {
    out.push_back(it->second->status());
  }
  return out;
}

std::shared_ptr<const ShmRegion> ShmRegistry::find(const std::string& tenant, const std::string& name) const {
  std::lock_guard lk(mu_);
  auto it = regions_.find({tenant, name});
  return it == regions_.end() ? nullptr : it->second;
}

size_t ShmRegistry::size() const {
  std::lock_guard lk(mu_);
  return regions_.size();
}

}  // namespace tensord
