// The backend seam (STYLE.md 1): every device-specific capability goes
// through this interface. Implementations: ops/cpu (always), ops/cuda (when
// built with nvcc), ops/fake (tests). Optional capabilities throw
// Error(kUnsupported, "backend X does not support Y").
//
// Thread-safety: every method may be called from any thread concurrently.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ops/partition_spec.h"
#include "ops/device.h"
#include "streams/stream_graph.h"
#include "streams/stream.h"

namespace tensord {

struct DeviceInfo {
  Device device;
  std::string name;
  int64_t total_memory = 0;  // bytes
  int compute_units = 0;     // cores or SMs
};

// A conditional node being captured (backend.h begin_conditional): IF has
// two bodies (then, else), WHILE one, each captured on the stream
// begin_body returns until end_body.
class CapturedConditional {
 public:
  virtual ~CapturedConditional() = default;
  virtual Stream begin_body(int i) = 0;
  // WHILE, at the end of the open body: run the body again while *pred
  // (a device bool) is true, at most max_iters body runs in all; past that
  // the loop stops and sets the overflow flag of its loop state.
  virtual void set_loop_condition(const void* pred, int64_t max_iters) = 0;
  virtual void end_body() = 0;
};

enum class ConditionalKind { kIf, kWhile };

// Bytes of a WHILE node's loop state in device memory: an int64 count of
// body runs and an int64 overflow flag (non-zero: stopped at max_iters).
inline constexpr size_t kLoopStateBytes = 16;

class Backend;

// Binds a job's stream to the calling thread for the guard's life
// (Backend::bind_thread_stream).
class ThreadStreamBinding {
 public:
  ThreadStreamBinding(Backend* b, Stream s);
  ~ThreadStreamBinding();
  ThreadStreamBinding(const ThreadStreamBinding&) = delete;
  ThreadStreamBinding& operator=(const ThreadStreamBinding&) = delete;

 private:
  Backend* b_;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu", "cuda", "fake".
  virtual std::string_view name() const = 0;
  // Devices this backend drives (empty: backend not usable).
  virtual std::vector<DeviceInfo> devices() const = 0;
  // Library versions for reproducibility ({"openblas": "0.3.21", ...}).
  virtual std::map<std::string, std::string> libraries() const = 0;

  // Raw device memory. allocate never returns null: it throws quota or
  // out-of-memory errors. Accounting per tenant is done by Storage.
  virtual void* allocate(Device d, size_t bytes) = 0;
  virtual void deallocate(Device d, void* p, size_t bytes) noexcept = 0;
  // Orders the calling thread's stream-less work (allocate, deallocate,
  // copy_to_device, copy_to_host) on `s` until unbind_thread_stream: a job
  // binds its stream while it runs, so a device backend may order memory on
  // that stream rather than the whole device. unbind waits for `s`. Default:
  // nothing (the CPU's and the fake's work is synchronous).
  virtual void bind_thread_stream(Stream s) {}
  virtual void unbind_thread_stream() {}
  // Bytes currently allocated on `d` through this backend.
  virtual int64_t allocated_bytes(Device d) const = 0;

  // Copies between host and device or within a device, ordered on `s`.
  // host_to_device/device_to_host are synchronous with respect to the host.
  virtual void copy_to_device(Device d, void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(Device d, void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_on_device(Stream s, void* dst, const void* src, size_t bytes) = 0;

  // Streams and events.
  virtual Stream create_stream(Device d) = 0;
  virtual void destroy_stream(Stream s) = 0;
  virtual Event record_event(Stream s) = 0;
  virtual void wait_event(Stream s, Event e) = 0;  // s waits for e (device side)
  virtual void synchronize(Stream s) = 0;          // host waits for s
  virtual bool is_capturing(Stream s) const = 0;

  // Splits the devices among the scheduler's partitions, once, before any
  // partition stream exists (CUDA: a green context per partition, sized by
  // share, with the workqueue limit where the toolkit has it). The default
  // does nothing: CPU partitions are core sets the scheduler pins.
  virtual void set_partitions(const std::vector<PartitionSpec>& partitions);
  // A stream that runs in partition `partition` (index into the last
  // set_partitions); the default is create_stream.
  virtual Stream create_partition_stream(Device d, int partition);

  // Host work ordered on a stream (cudaLaunchHostFunc): runs after what was
  // enqueued on `s` before it. Capture (torch.accelerator.Graph): work on
  // `s` between begin_capture and end_capture is recorded, not run;
  // launch_graph replays it on a stream. Optional: the defaults throw
  // unsupported.
  virtual void launch_host_func(Stream s, std::function<void()> fn);
  virtual void begin_capture(Stream s);
  virtual std::shared_ptr<StreamGraph> end_capture(Stream s);
  virtual void launch_graph(Stream s, const StreamGraph& g);
  // A conditional node (torch.cond / while_loop in a captured graph) at the
  // current point of the capture on `s`, taken by the device bool *pred;
  // WHILE: `loop_state` (kLoopStateBytes of device memory) is zeroed first
  // and counts the body runs. Optional: the default throws unsupported.
  virtual std::unique_ptr<CapturedConditional> begin_conditional(Stream s, ConditionalKind kind, const void* pred,
                                                                 void* loop_state);

  // Whether an op has a kernel on this backend (the scheduler asks first).
  virtual bool supports_op(std::string_view op) const = 0;
};

// The compiled-in backends, CPU always first (ggml-backend-reg style).
// `name` is "cpu", "cuda", "fake"; returns nullptr when not compiled in or
// not usable on this machine (no CUDA device, or one the build's kernels
// were not compiled for: ops/cuda_arch.h), saying why in `why_not`.
std::unique_ptr<Backend> make_backend(std::string_view name, int threads = 0, std::string* why_not = nullptr);
// Names of backends compiled into this binary.
std::vector<std::string> compiled_backends();

}  // namespace tensord
