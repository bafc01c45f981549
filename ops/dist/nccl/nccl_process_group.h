// NcclProcessGroup: the collectives of ProcessGroup on NCCL, for device
// tensors of one GPU per rank (API.md 8: "the engine is NCCL on CUDA").
// The ranks meet through a gloo rendezvous store (rank 0 writes the NCCL
// unique id under "<key_prefix>/nccl-id"); the group has its own CUDA
// stream and runs its collectives there, in seq order, on its own thread,
// each completed (stream synchronised) before its Work finishes.
// all_gather, reduce_scatter and all_to_all take dim 0 only (contiguous
// parts); other dims, and uneven all_gather extents, fail by name.
//
// Captured collectives (an SPMD graph member's device graph, API.md 8):
// the fingerprint exchange that checks the ranks agree runs once, before
// the capture, on the group's thread (agree_captured); the capture then
// enqueues the NCCL call on the capturing stream (launch_captured: NCCL
// records graph nodes, 2.9 and later), and a launch is waited for by
// polling that stream under the collective's timeout (wait_captured): a
// timeout or a cancelled job aborts the communicator, so the launch's
// kernels end, and breaks the group, as an uncaptured collective's timeout
// does.
// Its own library (ops/dist/nccl/CMakeLists.txt), built when NCCL and the
// CUDA backend are found (TENSORD_HAVE_NCCL); `gpu` tests.
#pragma once

#include <memory>
#include <string>

#include "ops/device.h"
#include "ops/dist/group_factory.h"
#include "ops/dist/process_group.h"

namespace gloo::rendezvous {
class Store;
}

namespace tensord {
class Backend;
class MemoryAccount;
}  // namespace tensord

namespace tensord::dist {

struct NcclOptions {
  std::shared_ptr<gloo::rendezvous::Store> store;
  std::string key_prefix;                  // default: the group's name
  Backend* backend = nullptr;              // allocates outputs (the CUDA backend)
  Device device{};                         // this rank's GPU
  std::shared_ptr<MemoryAccount> account;  // outputs are charged to it (may be null)
  std::chrono::milliseconds rendezvous_timeout{60000};
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  // Joins: blocks until every rank has initialised the communicator.
  NcclProcessGroup(int rank, int size, ProcessGroupOptions opts, NcclOptions nccl);
  ~NcclProcessGroup() override;

  std::string_view backend_name() const override { return "nccl"; }
  bool supports(CollectiveOp op) const override;
  bool supports_dtype(CollectiveOp op, ReduceOp reduce, DType dtype) const override;
  bool takes_device_tensors() const override { return true; }
  bool supports_capture() const override { return true; }
  void wait_captured(Stream stream, std::chrono::milliseconds timeout, const std::atomic<bool>* cancelled,
                     const std::string& what) override;
  void check_captured_launch(const std::string& what) const override;
  static std::string version();

 protected:
  std::vector<Tensor> run(const CollectiveCall& call, bool agree_only) override;
  void on_worker_start() override;
  std::shared_ptr<Work> agree_captured(const CollectiveCall& call) override;
  std::shared_ptr<void> launch_captured(const CollectiveCall& call, const Tensor& out, Stream stream) override;

 private:
  struct Comm;  // ncclComm_t and the stream, kept out of this header
  // The communicator, or unavailable naming `what` when the group is broken.
  void* usable_comm(const std::string& what) const;
  // Aborts the communicator (its kernels end) and breaks the group.
  void abort_comm(const std::string& why);

  NcclOptions nccl_;
  // Shared with the device graphs that captured its collectives: the
  // communicator is destroyed after the last of them (and the group).
  std::shared_ptr<Comm> comm_;
};

// The server's ranks on `backend` (CUDA): local rank r joins on GPU r,
// its rendezvous through the join's store (RankWorkersOptions::groups).
// Outputs are charged to no account here: the dist.* kernels charge them
// to the job's.
GroupFactory nccl_group_factory(Backend* backend);

}  // namespace tensord::dist
