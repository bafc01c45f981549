#include "ops/cuda/green_context.h"

#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "ops/cuda/cuda_check.h"
#include "ops/error.h"

namespace tensord::cuda {

namespace {

// The driver functions used here, typed from cuda.h's own prototypes
// (decltype does not reference the symbols, so libcuda is not linked).
struct DriverApi {
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetDevResource) device_get_dev_resource = nullptr;
  decltype(&::cuDevSmResourceSplitByCount) sm_resource_split_by_count = nullptr;
  decltype(&::cuDevResourceGenerateDesc) resource_generate_desc = nullptr;
  decltype(&::cuGreenCtxCreate) green_ctx_create = nullptr;
  decltype(&::cuGreenCtxDestroy) green_ctx_destroy = nullptr;
  decltype(&::cuGreenCtxGetDevResource) green_ctx_get_dev_resource = nullptr;
  decltype(&::cuGreenCtxStreamCreate) green_ctx_stream_create = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  bool complete = false;
};

template <typename Fn>
void resolve(Fn& out, const char* name, int version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess) {
    out = reinterpret_cast<Fn>(fn);
  }
}

// Resolved once. Versions as cudaTypedefs.h names them: PFN_cuGreenCtxCreate_v12040
// (green contexts appeared in CUDA 12.4), PFN_cuGreenCtxStreamCreate_v12050.
const DriverApi& driver() {
  static const DriverApi api = [] {
    DriverApi a;
    resolve(a.device_get, "cuDeviceGet", 2000);
    resolve(a.get_error_name, "cuGetErrorName", 6000);
    resolve(a.device_get_dev_resource, "cuDeviceGetDevResource", 12040);
    resolve(a.sm_resource_split_by_count, "cuDevSmResourceSplitByCount", 12040);
    resolve(a.resource_generate_desc, "cuDevResourceGenerateDesc", 12040);
    resolve(a.green_ctx_create, "cuGreenCtxCreate", 12040);
    resolve(a.green_ctx_destroy, "cuGreenCtxDestroy", 12040);
    resolve(a.green_ctx_get_dev_resource, "cuGreenCtxGetDevResource", 12040);
    resolve(a.green_ctx_stream_create, "cuGreenCtxStreamCreate", 12050);
    a.complete = a.device_get && a.device_get_dev_resource && a.sm_resource_split_by_count &&
                 a.resource_generate_desc && a.green_ctx_create && a.green_ctx_destroy &&
                 a.green_ctx_get_dev_resource && a.green_ctx_stream_create;
    return a;
  }();
  return api;
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (driver().get_error_name) driver().get_error_name(r, &name);
  throw Error(ErrorCode::kInternal,
              std::string("CUDA driver error ") + (name ? name : std::to_string(static_cast<int>(r))) + " in " + what);
}

}  // namespace

std::vector<int> plan_sm_counts(int total, int min_size, int align, const std::vector<double>& shares) {
  TENSORD_CHECK(total > 0 && min_size > 0 && align > 0, kInvalidArgument, "green contexts: bad SM geometry");
  // Partitions are made of whole groups of `unit` SMs: the minimum size,
  // rounded up to the alignment.
  const int unit = (min_size + align - 1) / align * align;
  std::vector<int> out;
  int used = 0;
  for (double share : shares) {
    const int n = std::max(1, static_cast<int>(std::floor(share * total + 1e-9)) / unit) * unit;
    used += n;
    out.push_back(n);
  }
  TENSORD_CHECK(used <= total / unit * unit, kInvalidArgument,
                "green contexts: the partitions need " + std::to_string(used) + " SMs, the device has " +
                    std::to_string(total) + " (in groups of " + std::to_string(unit) + ")");
  return out;
}

bool green_contexts_supported() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  return driver().complete;
}

struct GreenContexts::Impl {
  std::vector<CUgreenCtx> contexts;
};

GreenContexts::GreenContexts(int device, const std::vector<PartitionSpec>& partitions)
    : device_(device), impl_(std::make_unique<Impl>()) {
  if (!green_contexts_supported()) {
    throw Error(ErrorCode::kUnsupported, "backend cuda does not support green contexts (no driver or CUDA < 12.4)");
  }
  const DriverApi& d = driver();
  // Green contexts retain the primary context: make it active first.
  TENSORD_CUDA_CHECK(cudaSetDevice(device));
  TENSORD_CUDA_CHECK(cudaFree(nullptr));
  CUdevice dev = 0;
  check(d.device_get(&dev, device), "cuDeviceGet");
  CUdevResource all{};
  check(d.device_get_dev_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource(SM)");
  device_sms_ = static_cast<int>(all.sm.smCount);
  std::vector<double> shares;
  for (const auto& p : partitions) shares.push_back(p.share);
  const int align = static_cast<int>(std::max(1u, all.sm.smCoscheduledAlignment));
  const int min_size = static_cast<int>(std::max(1u, all.sm.minSmPartitionSize));

  try {
    // One split of the whole device into equal groups of `unit` SMs (the
    // driver's granularity); partition i gets want[i] / unit of them. SM
    // resources combined into one descriptor must come from the same split,
    // and splitting a split's remainder again is discouraged by the driver
    // documentation, hence one split, not one per partition. The split can
    // give fewer groups than smCount / unit (an H200's 132 SMs split into
    // 15 groups of 8, not 16: groups do not span GPCs), so the shares are
    // planned over the SMs the groups hold.
    const int unit = (min_size + align - 1) / align * align;
    unsigned int nb = static_cast<unsigned int>(device_sms_ / unit);
    std::vector<CUdevResource> groups(std::max(1u, nb));
    CUdevResource rest{};
    check(d.sm_resource_split_by_count(groups.data(), &nb, &all, &rest, 0, static_cast<unsigned>(unit)),
          "cuDevSmResourceSplitByCount");
    const std::vector<int> want = plan_sm_counts(static_cast<int>(nb) * unit, min_size, align, shares);
    size_t next = 0;
    for (size_t i = 0; i < partitions.size(); ++i) {
      const size_t take = static_cast<size_t>(want[i] / unit);
      if (next + take > nb) {
        throw Error(ErrorCode::kInvalidArgument, "green contexts: partition '" + partitions[i].name + "' needs " +
                                                     std::to_string(want[i]) + " SMs; the device split into " +
                                                     std::to_string(nb) + " groups of " + std::to_string(unit));
      }
      std::vector<CUdevResource> res(groups.begin() + static_cast<std::ptrdiff_t>(next),
                                     groups.begin() + static_cast<std::ptrdiff_t>(next + take));
      next += take;
      GreenPartition gp;
      gp.name = partitions[i].name;
      for (const auto& r : res) gp.sm_count += static_cast<int>(r.sm.smCount);
      gp.workqueue_limit = partitions[i].workqueue_limit;
#if CUDA_VERSION >= 13010
      // Workqueue concurrency limit per green context (CUDA 13.1+). The
      // toolkit on the build machines is 13.0, so this path is compiled out
      // there: green contexts then share the device's workqueues and the
      // scheduler alone enforces workqueue_limit.
      if (partitions[i].workqueue_limit > 0) {
        CUdevResource wq{};
        check(d.device_get_dev_resource(dev, &wq, CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG),
              "cuDeviceGetDevResource(WORKQUEUE_CONFIG)");
        wq.wqConfig.wqConcurrencyLimit = static_cast<unsigned int>(partitions[i].workqueue_limit);
        wq.wqConfig.sharingScope = CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED;
        res.push_back(wq);
        gp.workqueue_limit_applied = true;
      }
#endif
      CUdevResourceDesc desc = nullptr;
      check(d.resource_generate_desc(&desc, res.data(), static_cast<unsigned int>(res.size())),
            "cuDevResourceGenerateDesc");
      CUgreenCtx ctx = nullptr;
      check(d.green_ctx_create(&ctx, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate");
      impl_->contexts.push_back(ctx);
      partitions_.push_back(std::move(gp));
    }
  } catch (...) {
    for (CUgreenCtx c : impl_->contexts) d.green_ctx_destroy(c);
    throw;
  }
}

GreenContexts::~GreenContexts() {
  if (!impl_) return;
  for (CUgreenCtx c : impl_->contexts) driver().green_ctx_destroy(c);
}

int GreenContexts::queried_sm_count(size_t i) const {
  CUdevResource r{};
  check(driver().green_ctx_get_dev_resource(impl_->contexts.at(i), &r, CU_DEV_RESOURCE_TYPE_SM),
        "cuGreenCtxGetDevResource");
  return static_cast<int>(r.sm.smCount);
}

cudaStream_t GreenContexts::create_stream(size_t i, int priority) {
  CUstream s = nullptr;
  check(driver().green_ctx_stream_create(&s, impl_->contexts.at(i), CU_STREAM_NON_BLOCKING, priority),
        "cuGreenCtxStreamCreate");
  return static_cast<cudaStream_t>(s);
}

}  // namespace tensord::cuda
