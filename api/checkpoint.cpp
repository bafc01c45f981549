#include "api/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <sys/stat.h>

#include "api/safetensors.h"
#include "ops/error.h"
#include "scheduler/tenant.h"

namespace tensord {

namespace {
[[noreturn]] void sys_fail(const std::string& what) {
  throw Error(ErrorCode::kInternal, what + ": " + std::strerror(errno));
}

void write_all(int fd, const std::string& data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      sys_fail("write " + path);
    }
    off += static_cast<size_t>(n);
  }
}
}  // namespace

CheckpointInfo write_checkpoint(const std::string& dir, const Tenant& tenant) {
  ::mkdir(dir.c_str(), 0700);
  auto snap = tenant.store.snapshot();
  for (auto& [n, t] : snap) t = t.to_host();  // device-resident tensors are copied out
  CheckpointInfo ci;
  ci.path = dir + "/" + tenant.name + ".safetensors";
  ci.tensors = static_cast<int64_t>(snap.size());
  for (const auto& [n, t] : snap) ci.bytes += static_cast<int64_t>(t.nbytes());
  std::string data = encode_safetensors(snap, {{"format", "tensord-checkpoint-v1"}, {"tenant", tenant.name}});
  std::string tmp = ci.path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) sys_fail("open " + tmp);
  try {
    write_all(fd, data, tmp);
    if (::fsync(fd) != 0) sys_fail("fsync " + tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), ci.path.c_str()) != 0) sys_fail("rename " + tmp);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return ci;
}

int64_t restore_checkpoint(const std::string& dir, Tenant& tenant) {
  std::string path = dir + "/" + tenant.name + ".safetensors";
  std::ifstream in(path, std::ios::binary);
  if (!in) return 0;
  std::ostringstream ss;
  ss << in.rdbuf();
  auto body = std::make_shared<const std::string>(ss.str());
  SafetensorsFile f = parse_safetensors(body);
  int64_t n = static_cast<int64_t>(f.tensors.size());
  tenant.store.commit(std::move(f.tensors));
  return n;
}

}  // namespace tensord
