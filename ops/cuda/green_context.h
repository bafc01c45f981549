// CUDA green contexts, one per partition (API.md section 9): the device's
// SMs are split once into equal groups (cuDevSmResourceSplitByCount), each
// partition takes as many groups as its share allows
// (cuDevResourceGenerateDesc over them + cuGreenCtxCreate), the partition's streams
// are created in its green context (cuGreenCtxStreamCreate), and where the
// toolkit has it (CUDA >= 13.1) the context carries a workqueue config with
// the partition's workqueue_limit as its concurrency limit.
//
// The binary never links libcuda: every driver function is looked up at run
// time with cudaGetDriverEntryPointByVersion, so on a machine without a
// driver green_contexts_supported() is false and nothing else is called.
// Raw CUDA handles stay under ops/cuda/ (STYLE.md 2).
//
// Thread-safety: construction and destruction on one thread; create_stream
// may be called from any thread (the driver call takes no current context).
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "ops/partition_spec.h"

namespace tensord::cuda {

struct GreenPartition {
  std::string name;
  int sm_count = 0;                      // SMs the green context was given
  int workqueue_limit = 0;               // as requested
  bool workqueue_limit_applied = false;  // false where the toolkit predates CUDA 13.1
};

// SMs per partition for a device of `total` SMs that splits into groups of
// `unit` = min_size rounded up to `align` SMs: floor(share * total) rounded
// down to whole groups, at least one group. Throws Error(kInvalidArgument)
// when the partitions need more groups than the device has. Pure: tested
// without a device.
std::vector<int> plan_sm_counts(int total, int min_size, int align, const std::vector<double>& shares);

// True when the driver exposes the green-context entry points (a driver is
// loaded, CUDA >= 12.4) and at least one device answers.
bool green_contexts_supported();

// The green contexts of one device, in request order.
class GreenContexts {
 public:
  // Throws Error(kUnsupported) without green-context support, Error(kInvalidArgument)
  // when the SMs cannot be split as asked, Error(kInternal) on a driver error
  // (every driver call is checked).
  // Per partition: `share` of the device's SMs, and `workqueue_limit` the
  // most concurrent stream-ordered workloads (0 or less: the driver's
  // default).
  GreenContexts(int device, const std::vector<PartitionSpec>& partitions);
  ~GreenContexts();
  GreenContexts(const GreenContexts&) = delete;
  GreenContexts& operator=(const GreenContexts&) = delete;

  int device() const { return device_; }
  int device_sms() const { return device_sms_; }
  size_t size() const { return partitions_.size(); }
  const GreenPartition& partition(size_t i) const { return partitions_.at(i); }
  // SMs the driver reports for partition i's green context (cuGreenCtxGetDevResource).
  int queried_sm_count(size_t i) const;

  // A new non-blocking stream in partition i's green context; destroy it
  // with cudaStreamDestroy before this object goes away.
  cudaStream_t create_stream(size_t i, int priority = 0);

 private:
  struct Impl;
  int device_ = 0;
  int device_sms_ = 0;
  std::vector<GreenPartition> partitions_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensord::cuda
