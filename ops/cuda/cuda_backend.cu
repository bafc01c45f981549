#include "ops/cuda/cuda_backend.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <cublas_v2.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>

#include "ops/cuda/cuda_check.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

// Resolves a driver-API symbol without linking libcuda.
void* driver_symbol(const char* name, int version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    return nullptr;
  }
  return fn;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int count) : count_(count) {}
  ~CudaBackend() override {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [id, s] : streams_) cudaStreamDestroy(s.stream);
    for (auto& [id, e] : events_) cudaEventDestroy(e);
  }

  std::string_view name() const override { return "cuda"; }

  std::vector<DeviceInfo> devices() const override {
    std::vector<DeviceInfo> out;
    for (int i = 0; i < count_; ++i) {
      cudaDeviceProp p{};
      TENSORD_CUDA_CHECK(cudaGetDeviceProperties(&p, i));
      out.push_back(DeviceInfo{Device{DeviceType::kCUDA, static_cast<int16_t>(i)}, p.name,
                               static_cast<int64_t>(p.totalGlobalMem), p.multiProcessorCount});
    }
    return out;
  }

  std::map<std::string, std::string> libraries() const override {
    std::map<std::string, std::string> libs;
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    libs["cudart"] = std::to_string(rt);
    libs["driver"] = std::to_string(drv);
    int major = 0, minor = 0, patch = 0;
    cusolverGetProperty(MAJOR_VERSION, &major);
    cusolverGetProperty(MINOR_VERSION, &minor);
    cusolverGetProperty(PATCH_LEVEL, &patch);
    libs["cusolver"] = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
    using DriverGetVersion = CUresult (*)(int*);
    if (auto fn = reinterpret_cast<DriverGetVersion>(driver_symbol("cuDriverGetVersion", 12000))) {
      int v = 0;
      if (fn(&v) == CUDA_SUCCESS) libs["driver_api"] = std::to_string(v);
    }
    return libs;
  }

  void* allocate(Device d, size_t bytes) override {
    TENSORD_CUDA_CHECK(cudaSetDevice(d.index));
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e == cudaErrorMemoryAllocation) {
      throw Error(ErrorCode::kQuotaExceeded,
                  "cuda:" + std::to_string(d.index) + " out of memory allocating " + std::to_string(bytes) + " bytes");
    }
    TENSORD_CUDA_CHECK(e);
    allocated_.fetch_add(static_cast<int64_t>(bytes));
    return p;
  }

  void deallocate(Device d, void* p, size_t bytes) noexcept override {
    cudaSetDevice(d.index);
    cudaFree(p);
    allocated_.fetch_sub(static_cast<int64_t>(bytes));
  }

  int64_t allocated_bytes(Device) const override { return allocated_.load(); }

  void copy_to_device(Device d, void* dst, const void* src, size_t bytes) override {
    TENSORD_CUDA_CHECK(cudaSetDevice(d.index));
    TENSORD_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }
  void copy_to_host(Device d, void* dst, const void* src, size_t bytes) override {
    TENSORD_CUDA_CHECK(cudaSetDevice(d.index));
    TENSORD_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void copy_on_device(Stream s, void* dst, const void* src, size_t bytes) override {
    TENSORD_CUDA_CHECK(cudaSetDevice(s.device.index));
    TENSORD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, raw(s)));
  }

  Stream create_stream(Device d) override {
    TENSORD_CUDA_CHECK(cudaSetDevice(d.index));
    cudaStream_t s = nullptr;
    TENSORD_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    std::lock_guard<std::mutex> lk(mu_);
    int64_t id = next_id_++;
    streams_[id] = StreamEntry{s, d};
    return Stream{d, id};
  }
  void destroy_stream(Stream s) override {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = streams_.find(s.id);
    if (it == streams_.end()) return;
    cudaStreamDestroy(it->second.stream);
    streams_.erase(it);
  }
  Event record_event(Stream s) override {
    cudaEvent_t e = nullptr;
    TENSORD_CUDA_CHECK(cudaSetDevice(s.device.index));
    TENSORD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    TENSORD_CUDA_CHECK(cudaEventRecord(e, raw(s)));
    std::lock_guard<std::mutex> lk(mu_);
    int64_t id = next_id_++;
    events_[id] = e;
    return Event{s.device, id};
  }
  void wait_event(Stream s, Event ev) override {
    cudaEvent_t e = nullptr;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = events_.find(ev.id);
      if (it == events_.end()) throw Error(ErrorCode::kInternal, "cuda: unknown event");
      e = it->second;
    }
    TENSORD_CUDA_CHECK(cudaStreamWaitEvent(raw(s), e, 0));
  }
  void synchronize(Stream s) override { TENSORD_CUDA_CHECK(cudaStreamSynchronize(raw(s))); }
  bool is_capturing(Stream s) const override {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    TENSORD_CUDA_CHECK(cudaStreamIsCapturing(raw(s), &st));
    return st == cudaStreamCaptureStatusActive;
  }

  bool supports_op(std::string_view op) const override {
    const OpDef* def = OpRegistry::global().find(op);
    return def && def->kernels.count("cuda");
  }

 private:
  struct StreamEntry {
    cudaStream_t stream;
    Device device;
  };
  cudaStream_t raw(Stream s) const {
    if (s.id == 0) return nullptr;  // legacy default stream
    std::lock_guard<std::mutex> lk(mu_);
    auto it = streams_.find(s.id);
    if (it == streams_.end()) throw Error(ErrorCode::kInternal, "cuda: unknown stream");
    return it->second.stream;
  }

  int count_;
  std::atomic<int64_t> allocated_{0};
  mutable std::mutex mu_;
  int64_t next_id_ = 1;
  std::unordered_map<int64_t, StreamEntry> streams_;
  std::unordered_map<int64_t, cudaEvent_t> events_;
};

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend() {
  int n = cuda_device_count();
  if (n <= 0) return nullptr;
  return std::make_unique<CudaBackend>(n);
}

}  // namespace tensord
