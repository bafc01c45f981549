#include "api/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

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

std::string file_of(const std::string& dir, const std::string& tenant) {
  return dir + "/" + tenant + ".safetensors";
}

// Temp files are "<tenant>.safetensors.tmp.XXXXXX" (mkstemp: unique per write).
std::string temp_prefix(const std::string& tenant) {
  return tenant + ".safetensors.tmp.";
}
}  // namespace

CheckpointInfo write_checkpoint(const std::string& dir, const Tenant& tenant) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) sys_fail("mkdir " + dir);
  CheckpointInfo ci;
  auto snap = tenant.store.snapshot(ci.version);
  for (auto& [n, t] : snap) t = t.to_host();  // device-resident tensors are copied out
  ci.path = file_of(dir, tenant.name);
  ci.tensors = static_cast<int64_t>(snap.size());
  for (const auto& [n, t] : snap) ci.bytes += static_cast<int64_t>(t.nbytes());
  // Keys no tensor name can be (':'): an MX tensor's description takes the
  // key of its name (api/mx_wire.h), so "format" would clash with one.
  std::string data =
      encode_safetensors(snap, {{"tensord:format", "tensord-checkpoint-v1"}, {"tensord:tenant", tenant.name}});
  snap.clear();
  std::string tmp = dir + "/" + temp_prefix(tenant.name) + "XXXXXX";
  std::vector<char> name(tmp.begin(), tmp.end());
  name.push_back('\0');
  int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) sys_fail("create a temp file in " + dir);
  tmp.assign(name.data());
  try {
    write_all(fd, data, tmp);
    if (::fsync(fd) != 0) sys_fail("fsync " + tmp);
    if (::close(fd) != 0) {
      fd = -1;
      sys_fail("close " + tmp);
    }
    fd = -1;
    if (::rename(tmp.c_str(), ci.path.c_str()) != 0) sys_fail("rename " + tmp);
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  // The rename is durable once the directory is.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) sys_fail("open " + dir);
  const int rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0) sys_fail("fsync " + dir);
  return ci;
}

RestoreInfo restore_checkpoint(const std::string& dir, Tenant& tenant) {
  RestoreInfo ri;
  ri.path = file_of(dir, tenant.name);
  // Temp files of writes that never reached their rename: the file they
  // were to replace is still whole.
  const std::string prefix = temp_prefix(tenant.name);
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.size() == prefix.size() + 6 && n.compare(0, prefix.size(), prefix) == 0) {
        if (::unlink((dir + "/" + n).c_str()) == 0) ++ri.removed_temps;
      }
    }
    ::closedir(d);
  }
  struct stat st {};
  if (::stat(ri.path.c_str(), &st) != 0) {
    if (errno != ENOENT) ri.skipped = std::string("cannot stat: ") + std::strerror(errno);
    return ri;
  }
  std::ifstream in(ri.path, std::ios::binary);
  if (!in) {
    ri.skipped = "cannot open";
    return ri;
  }
  try {
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw Error(ErrorCode::kInternal, "read error");
    auto body = std::make_shared<const std::string>(ss.str());
    SafetensorsFile f = parse_safetensors(body);  // validates the whole file first
    auto fmt = f.metadata.find("tensord:format");
    if (fmt == f.metadata.end()) fmt = f.metadata.find("format");  // files written before MX tensors
    if (fmt != f.metadata.end() && fmt->second != "tensord-checkpoint-v1") {
      throw Error(ErrorCode::kBadRequest, "unknown checkpoint format '" + fmt->second + "'");
    }
    for (const auto& [n, t] : f.tensors) {
      validate_tensor_name(n);
      ri.bytes += static_cast<int64_t>(t.nbytes());
    }
    const int64_t limit = tenant.account->limit();
    ri.over_quota = ri.bytes > limit - tenant.account->used();
    ri.tensors = static_cast<int64_t>(f.tensors.size());
    tenant.store.commit(std::move(f.tensors), /*enforce_quota=*/false);
  } catch (const Error& e) {
    ri = RestoreInfo{ri.path, 0, 0, false, e.message(), ri.removed_temps};
  } catch (const std::exception& e) {
    ri = RestoreInfo{ri.path, 0, 0, false, e.what(), ri.removed_temps};
  }
  return ri;
}

}  // namespace tensord
