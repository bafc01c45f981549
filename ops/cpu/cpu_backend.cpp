#include "ops/cpu/cpu_backend.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "ops/error.h"
#include "ops/op_registry.h"

namespace tensord {

namespace {
// The block cache holds at most 1/8 of physical memory, and never more than 4 GiB.
size_t cache_capacity() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGE_SIZE);
  size_t phys = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : (size_t{1} << 32);
  return std::min(phys / 8, size_t{4} << 30);
}
}  // namespace

CpuBackend::CpuBackend(int threads) : pool_(threads), cache_(cache_capacity()) {
  streams_.emplace(0, std::make_shared<HostStream>());  // the default stream
}

std::vector<DeviceInfo> CpuBackend::devices() const {
  DeviceInfo d;
  d.device = Device{DeviceType::kCPU, 0};
  d.compute_units = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGE_SIZE);
  d.total_memory = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) d.name = line.substr(p + 2);
      break;
    }
  }
  if (d.name.empty()) d.name = "cpu";
  return {d};
}

std::map<std::string, std::string> CpuBackend::libraries() const {
  std::map<std::string, std::string> libs;
  const char* cfg = openblas_get_config();
  libs["openblas"] = cfg ? cfg : "unknown";
  libs["threads"] = std::to_string(pool_.size());
  return libs;
}

void* CpuBackend::allocate(Device d, size_t bytes) {
  void* p = cache_.allocate(bytes);
  if (!p) throw Error(ErrorCode::kQuotaExceeded, "cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
  allocated_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  return p;
}

void CpuBackend::deallocate(Device d, void* p, size_t bytes) noexcept {
  cache_.deallocate(p, bytes);
  allocated_.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

void CpuBackend::copy_to_device(Device d, void* dst, const void* host_src, size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}
void CpuBackend::copy_to_host(Device d, void* host_dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(host_dst, src, bytes);
}
void CpuBackend::copy_on_device(Stream s, void* dst, const void* src, size_t bytes) {
  if (bytes) std::memmove(dst, src, bytes);
}

namespace {
// The recorded host tasks of a capture, run in order on replay.
class HostGraph final : public StreamGraph {
 public:
  explicit HostGraph(std::vector<HostStream::Task> tasks) : tasks_(std::move(tasks)) {}
  size_t nodes() const override { return tasks_.size(); }
  void run() const {
    for (const auto& t : tasks_) t();
  }

 private:
  std::vector<HostStream::Task> tasks_;
};
}  // namespace

std::shared_ptr<HostStream> CpuBackend::stream(Stream s) const {
  std::lock_guard lock(streams_mu_);
  auto it = streams_.find(s.id);
  if (it != streams_.end()) return it->second;
  throw Error(ErrorCode::kNotFound, "no stream " + std::to_string(s.id) + " on " + s.device.str());
}

Stream CpuBackend::create_stream(Device d) {
  std::lock_guard lock(streams_mu_);
  int64_t id = next_stream_++;
  streams_.emplace(id, std::make_shared<HostStream>());
  return Stream{d, id};
}

void CpuBackend::destroy_stream(Stream s) {
  std::shared_ptr<HostStream> hs;
  {
    std::lock_guard lock(streams_mu_);
    auto it = streams_.find(s.id);
    if (it == streams_.end() || s.id == 0) return;
    hs = std::move(it->second);
    streams_.erase(it);
  }
  // As cudaStreamDestroy: queued work still completes.
  hs->wait_until(hs->record());
}

Event CpuBackend::record_event(Stream s) {
  return Event{s.device, s.id, stream(s)->record()};
}

void CpuBackend::wait_event(Stream s, Event e) {
  stream(s)->wait_event(stream(Stream{e.device, e.id}), e.position);
}

void CpuBackend::synchronize(Stream s) {
  stream(s)->synchronize();
}

bool CpuBackend::is_capturing(Stream s) const {
  return stream(s)->capturing();
}

void CpuBackend::launch_host_func(Stream s, std::function<void()> fn) {
  stream(s)->enqueue(std::move(fn));
}

void CpuBackend::begin_capture(Stream s) {
  stream(s)->begin_capture();
}

std::shared_ptr<StreamGraph> CpuBackend::end_capture(Stream s) {
  return std::make_shared<HostGraph>(stream(s)->end_capture());
}

void CpuBackend::launch_graph(Stream s, const StreamGraph& g) {
  const auto* hg = dynamic_cast<const HostGraph*>(&g);
  if (!hg) throw Error(ErrorCode::kInvalidArgument, "graph was not captured by the cpu backend");
  // Kept alive by the caller until the stream has run it (as cudaGraphLaunch
  // needs its exec); the lambda holds a reference.
  stream(s)->enqueue([hg] { hg->run(); });
}

bool CpuBackend::supports_op(std::string_view op) const {
  const OpDef* def = OpRegistry::global().find(op);
  return def && def->kernels.count("cpu");
}

}  // namespace tensord
