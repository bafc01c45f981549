#include "ops/cuda/cuda_backend.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <cublas_v2.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ops/cuda/conditional_node.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/green_context.h"
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

using HostFn = std::function<void()>;

// A captured stream: the graph and its executable, instantiated once. It
// owns the host functions its host nodes call: they run at every replay.
class CudaGraph final : public StreamGraph {
 public:
  CudaGraph(cudaGraph_t g, std::vector<std::unique_ptr<HostFn>> host_fns) : graph_(g), host_fns_(std::move(host_fns)) {
    cudaError_t e = cudaGraphInstantiate(&exec_, graph_, 0);
    if (e != cudaSuccess) {
      cudaGraphDestroy(graph_);
      TENSORD_CUDA_CHECK(e);
    }
  }
  ~CudaGraph() override {
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  size_t nodes() const override {
    size_t n = 0;
    TENSORD_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &n));
    return n;
  }
  cudaGraphExec_t exec() const { return exec_; }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::vector<std::unique_ptr<HostFn>> host_fns_;
};

// The stream a job bound to this thread (bind_thread_stream), or none.
thread_local cudaStream_t t_stream = nullptr;
thread_local bool t_bound = false;

// TENSORD_CUDA_STREAM_ORDERED=1: device memory from the device's default
// pool, allocated and freed in the order of the bound job's stream
// (cudaMallocAsync / cudaFreeAsync; freed blocks stay cached in the pool),
// and a bound thread's host copies ordered on its stream instead of the
// whole device. Off by default until it has run on more than one device.
bool stream_ordered_from_env() {
  const char* v = std::getenv("TENSORD_CUDA_STREAM_ORDERED");
  return v != nullptr && std::string(v) == "1";
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int count) : count_(count), stream_ordered_(stream_ordered_from_env()) {
    if (!stream_ordered_) return;
    for (int i = 0; i < count_; ++i) {
      cudaMemPool_t pool = nullptr;
      if (cudaDeviceGetDefaultMemPool(&pool, i) != cudaSuccess) continue;
      uint64_t keep = UINT64_MAX;  // freed blocks stay in the pool for the next job
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
  }
  ~CudaBackend() override {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [id, s] : streams_) {
      if (s.owned) cudaStreamDestroy(s.stream);
    }
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
    libs["allocator"] = stream_ordered_ ? "stream-ordered pool" : "cudaMalloc";
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
    const bool ordered = ordered_stream() != nullptr;
    cudaError_t e = ordered ? cudaMallocAsync(&p, bytes ? bytes : 1, t_stream) : cudaMalloc(&p, bytes ? bytes : 1);
    if (e == cudaErrorMemoryAllocation && ordered) {
      cudaGetLastError();
      // Blocks cached in the pool for other sizes: give them back, try again.
      cudaMemPool_t pool = nullptr;
      if (cudaDeviceGetDefaultMemPool(&pool, d.index) == cudaSuccess) {
        cudaDeviceSynchronize();
        cudaMemPoolTrimTo(pool, 0);
      }
      e = cudaMallocAsync(&p, bytes ? bytes : 1, t_stream);
    }
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw Error(ErrorCode::kQuotaExceeded,
                  "cuda:" + std::to_string(d.index) + " out of memory allocating " + std::to_string(bytes) + " bytes");
    }
    TENSORD_CUDA_CHECK(e);
    if (ordered) {
      std::lock_guard<std::mutex> lk(mu_);
      pooled_.insert(p);
    }
    allocated_.fetch_add(static_cast<int64_t>(bytes));
    return p;
  }

  // Pool memory goes back in stream order: on the bound stream (after the
  // work queued there that may still read it), or, on a thread with no
  // job, on the legacy stream (every job that used it has synchronized its
  // stream: unbind_thread_stream waits).
  void deallocate(Device d, void* p, size_t bytes) noexcept override {
    cudaSetDevice(d.index);
    bool pooled = false;
    if (stream_ordered_) {
      std::lock_guard<std::mutex> lk(mu_);
      pooled = pooled_.erase(p) > 0;
    }
    if (pooled && !(t_bound && capturing(t_stream))) {
      cudaFreeAsync(p, t_bound ? t_stream : nullptr);
    } else {
      cudaFree(p);
    }
    allocated_.fetch_sub(static_cast<int64_t>(bytes));
  }

  // Also makes the stream's GPU the thread's current device: an SPMD rank's
  // thread runs its kernels on GPU r (scheduler/spmd/spmd_run.h), and a launch on
  // a stream of another device than the current one fails.
  void bind_thread_stream(Stream s) override {
    if (s.device.type == DeviceType::kCUDA) TENSORD_CUDA_CHECK(cudaSetDevice(s.device.index));
    t_stream = raw(s);
    t_bound = true;
  }
  void unbind_thread_stream() override {
    if (t_bound) cudaStreamSynchronize(t_stream);  // a failed job's queued work ends before its memory is reused
    t_bound = false;
    t_stream = nullptr;
  }

  int64_t allocated_bytes(Device) const override { return allocated_.load(); }

  // Partition streams are non-blocking: they do not wait for the legacy
  // stream cudaMemcpy uses, nor it for them. So an upload is complete before
  // this returns (a kernel on any stream may read it next), and a download
  // first waits for the device's queued work (a kernel on any stream may
  // have written the source).
  // Stream-ordered (above): a bound thread's copies go on its job's stream,
  // which is where the memory was allocated and its writers ran (a stored
  // tensor another job wrote was synchronized before it was committed).
  void copy_to_device(Device d, void* dst, const void* src, size_t bytes) override {
    TENSORD_CUDA_CHECK(cudaSetDevice(d.index));
    if (copied_in_stream_order(dst, src, bytes, cudaMemcpyHostToDevice)) return;
    TENSORD_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    TENSORD_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }
  void copy_to_host(Device d, void* dst, const void* src, size_t bytes) override {
    TENSORD_CUDA_CHECK(cudaSetDevice(d.index));
    if (copied_in_stream_order(dst, src, bytes, cudaMemcpyDeviceToHost)) return;
    TENSORD_CUDA_CHECK(cudaDeviceSynchronize());
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
    if (it->second.owned) cudaStreamDestroy(it->second.stream);
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
  // The stream this thread's memory and copies are ordered on: the bound
  // job's, in stream-ordered mode, unless it is capturing; else null (the
  // plain, device-wide calls).
  cudaStream_t ordered_stream() const {
    return stream_ordered_ && t_bound && !capturing(t_stream) ? t_stream : nullptr;
  }
  // A host copy on ordered_stream(), complete when it returns; false (and
  // nothing done) when there is none.
  bool copied_in_stream_order(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) const {
    cudaStream_t s = ordered_stream();
    if (!s) return false;
    TENSORD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s));
    TENSORD_CUDA_CHECK(cudaStreamSynchronize(s));
    return true;
  }
  // Any capture state (an invalidated capture included): no stream-ordered
  // allocation or copy may go on such a stream.
  static bool capturing(cudaStream_t s) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &st) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return st != cudaStreamCaptureStatusNone;
  }

  // A green context per partition on device 0 (the scheduler's device).
  // Without driver support for them the partitions share the whole device
  // (said once on stderr); a split the device cannot give is an error.
  void set_partitions(const std::vector<PartitionSpec>& parts) override {
    if (parts.size() <= 1 || !cuda::green_contexts_supported()) {
      if (parts.size() > 1) std::fprintf(stderr, "tensord: no CUDA green contexts; partitions share the device\n");
      return;
    }
    std::lock_guard<std::mutex> lk(mu_);
    green_ = std::make_unique<cuda::GreenContexts>(0, parts);
  }
  Stream create_partition_stream(Device d, int partition) override {
    if (!green_ || d.index != green_->device() || partition < 0 || static_cast<size_t>(partition) >= green_->size()) {
      return create_stream(d);
    }
    cudaStream_t s = green_->create_stream(static_cast<size_t>(partition));
    std::lock_guard<std::mutex> lk(mu_);
    int64_t id = next_id_++;
    streams_[id] = StreamEntry{s, d};
    return Stream{d, id};
  }

  // Host work in stream order: cudaLaunchHostFunc with the function on the
  // heap. Launched, the callback frees it after its one run; captured, it
  // becomes a host node that runs at every replay, so the graph owns it (the
  // capture is thread-local: the thread that ends it takes what it captured,
  // conditional bodies' streams included).
  void launch_host_func(Stream s, std::function<void()> fn) override {
    auto heap = std::make_unique<HostFn>(std::move(fn));
    if (is_capturing(s)) {
      TENSORD_CUDA_CHECK(cudaLaunchHostFunc(raw(s), &CudaBackend::host_call, heap.get()));
      std::lock_guard<std::mutex> lk(mu_);
      captured_fns_[std::this_thread::get_id()].push_back(std::move(heap));
      return;
    }
    TENSORD_CUDA_CHECK(cudaLaunchHostFunc(raw(s), &CudaBackend::host_call_once, heap.get()));
    heap.release();  // host_call_once frees it
  }
  // Stream capture into a cudaGraph_t (thread-local mode: other threads'
  // unrelated CUDA calls are not disturbed), instantiated once at the end.
  void begin_capture(Stream s) override {
    TENSORD_CUDA_CHECK(cudaSetDevice(s.device.index));
    TENSORD_CUDA_CHECK(cudaStreamBeginCapture(raw(s), cudaStreamCaptureModeThreadLocal));
  }
  std::shared_ptr<StreamGraph> end_capture(Stream s) override {
    std::vector<std::unique_ptr<HostFn>> fns;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = captured_fns_.find(std::this_thread::get_id());
      if (it != captured_fns_.end()) {
        fns = std::move(it->second);
        captured_fns_.erase(it);
      }
    }
    cudaGraph_t g = nullptr;
    TENSORD_CUDA_CHECK(cudaStreamEndCapture(raw(s), &g));
    return std::make_shared<CudaGraph>(g, std::move(fns));
  }
  void launch_graph(Stream s, const StreamGraph& g) override {
    const auto* cg = dynamic_cast<const CudaGraph*>(&g);
    if (!cg) throw Error(ErrorCode::kInvalidArgument, "graph was not captured by the cuda backend");
    TENSORD_CUDA_CHECK(cudaGraphLaunch(cg->exec(), raw(s)));
  }

  std::unique_ptr<CapturedConditional> begin_conditional(Stream s, ConditionalKind kind, const void* pred,
                                                         void* loop_state) override {
    const cudaStream_t cs = raw(s);
    if (kind == ConditionalKind::kWhile) TENSORD_CUDA_CHECK(cudaMemsetAsync(loop_state, 0, kLoopStateBytes, cs));
    auto node = std::make_unique<cuda::ConditionalNode>(
        cs, kind == ConditionalKind::kIf ? cuda::ConditionalNode::Kind::kIf : cuda::ConditionalNode::Kind::kWhile,
        static_cast<const bool*>(pred));
    return std::make_unique<Conditional>(*this, s.device, std::move(node), static_cast<int64_t*>(loop_state));
  }

  bool supports_op(std::string_view op) const override {
    const OpDef* def = OpRegistry::global().find(op);
    return def && def->kernels.count("cuda");
  }

  cudaStream_t raw(Stream s) const {
    if (s.id == 0) return nullptr;  // legacy default stream
    std::lock_guard<std::mutex> lk(mu_);
    auto it = streams_.find(s.id);
    if (it == streams_.end()) throw Error(ErrorCode::kInternal, "cuda: unknown stream");
    return it->second.stream;
  }

 private:
  struct StreamEntry {
    cudaStream_t stream;
    Device device;
    bool owned = true;  // false: a conditional body's stream, which its node owns
  };

  // A conditional node whose body streams are known to the backend (as
  // Stream ids) while they capture, so kernels can launch on them.
  class Conditional final : public CapturedConditional {
   public:
    Conditional(CudaBackend& b, Device d, std::unique_ptr<cuda::ConditionalNode> n, int64_t* state)
        : b_(b), d_(d), node_(std::move(n)), state_(state) {}
    ~Conditional() override { forget(); }
    Stream begin_body(int i) override {
      cudaStream_t s = node_->begin_body(i);
      std::lock_guard<std::mutex> lk(b_.mu_);
      id_ = b_.next_id_++;
      b_.streams_[id_] = StreamEntry{s, d_, false};
      return Stream{d_, id_};
    }
    void set_loop_condition(const void* pred, int64_t max_iters) override {
      node_->set_loop_condition(static_cast<const bool*>(pred), state_, max_iters);
    }
    void end_body() override {
      node_->end_body();
      forget();
    }

   private:
    void forget() {
      if (!id_) return;
      std::lock_guard<std::mutex> lk(b_.mu_);
      b_.streams_.erase(id_);
      id_ = 0;
    }
    CudaBackend& b_;
    Device d_;
    std::unique_ptr<cuda::ConditionalNode> node_;
    int64_t* state_;
    int64_t id_ = 0;
  };

  static void CUDART_CB host_call(void* p) {
    try {
      (*static_cast<HostFn*>(p))();
    } catch (...) {  // nothing may unwind into the CUDA runtime
    }
  }
  static void CUDART_CB host_call_once(void* p) {
    std::unique_ptr<HostFn> fn(static_cast<HostFn*>(p));
    host_call(fn.get());
  }

  int count_;
  const bool stream_ordered_;
  std::atomic<int64_t> allocated_{0};
  mutable std::mutex mu_;
  int64_t next_id_ = 1;
  // Declared before the streams: the destructor body destroys every stream
  // before the green contexts they run in go away.
  std::unique_ptr<cuda::GreenContexts> green_;
  std::unordered_map<int64_t, StreamEntry> streams_;
  std::unordered_map<int64_t, cudaEvent_t> events_;
  std::unordered_set<void*> pooled_;  // from cudaMallocAsync (stream-ordered mode), under mu_
  // Host functions of the captures in progress, by capturing thread.
  std::unordered_map<std::thread::id, std::vector<std::unique_ptr<HostFn>>> captured_fns_;
};

void register_cuda_kernels(OpRegistry& r) {
  cuda::register_elementwise_kernels(r);
  cuda::register_linalg_kernels(r);
  cuda::register_optim_kernels(r);
  cuda::register_mx_kernels(r);
}
const KernelRegistration kCudaKernels(register_cuda_kernels);

}  // namespace

namespace cuda {
cudaStream_t raw_stream(const OpContext& ctx) {
  TENSORD_ASSERT(ctx.backend && ctx.backend->name() == "cuda");
  // A launch goes to the current device: make it the stream's (an SPMD
  // rank's thread may have copied from another GPU since it bound its own).
  if (ctx.stream.device.type == DeviceType::kCUDA) {
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != ctx.stream.device.index) {
      TENSORD_CUDA_CHECK(cudaSetDevice(ctx.stream.device.index));
    }
  }
  return static_cast<const CudaBackend*>(ctx.backend)->raw(ctx.stream);
}
}  // namespace cuda

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

const CudaArchList& cuda_built_architectures() {
  // Set by ops/CMakeLists.txt from CMAKE_CUDA_ARCHITECTURES.
  static const CudaArchList built = parse_cuda_architectures(TENSORD_CUDA_ARCHITECTURES);
  return built;
}

std::unique_ptr<Backend> make_cuda_backend(std::string* why_not) {
  int n = cuda_device_count();
  if (n <= 0) {
    if (why_not) *why_not = "no CUDA device answers (no GPU, or no driver)";
    return nullptr;
  }
  // A device the kernels were not built for would fail every launch with
  // cudaErrorNoKernelImageForDevice: refuse it here, by name.
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      cudaGetLastError();
      if (why_not) *why_not = "CUDA device " + std::to_string(i) + " does not answer cudaGetDeviceProperties";
      return nullptr;
    }
    std::string why = cuda_device_refusal(i, p.name, p.major, p.minor, cuda_built_architectures());
    if (!why.empty()) {
      if (why_not) *why_not = std::move(why);
      return nullptr;
    }
  }
  return std::make_unique<CudaBackend>(n);
}

}  // namespace tensord
