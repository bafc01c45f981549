// GlooProcessGroup: the collectives of ProcessGroup on Gloo (Debian's
// libgloo), its TCP transport and its algorithms. One Gloo context per
// group and rank, joined through a rendezvous store (ops/dist/store.h); collectives run in seq order on the group's own
// thread.
//
// Before each collective the ranks exchange a fingerprint (seq, op, dtype,
// shape, dim, src, split sizes) point to point, so ranks that disagree fail
// together with a named error instead of corrupting Gloo's transport (a
// size mismatch aborts the process inside Gloo), and a timeout names the
// ranks that never arrived. A timeout or transport error breaks the group:
// later collectives fail at once (kUnavailable), as an aborted c10d group,
// and its connections close, so peers waiting on this rank fail at once.
// abort() does the same from any thread: the fingerprint exchange in
// progress ends through Gloo's abortWaitRecv, and a peer waiting for this
// rank's fingerprint or data sees its connection close (no polling, no
// transport of our own).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ops/dist/gloo_fingerprint.h"
#include "ops/dist/process_group.h"
#include "ops/dist/store.h"

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}
namespace transport {
class Device;
}
}  // namespace gloo

namespace tensord::dist {

struct GlooOptions {
  // Where the ranks meet; keys go under "<key_prefix>/" (default: the group
  // name), so several groups may share one store.
  std::shared_ptr<gloo::rendezvous::Store> store;
  std::string key_prefix;
  // The address this rank listens on for its peers.
  std::string hostname = "127.0.0.1";
  // How long joining may wait for the other ranks.
  std::chrono::milliseconds rendezvous_timeout{60000};
  // A TCP device to share between a rank's groups; null: one of its own.
  std::shared_ptr<gloo::transport::Device> device;
};

// A loopback/host TCP device for `hostname`.
std::shared_ptr<gloo::transport::Device> make_tcp_device(const std::string& hostname);

class GlooProcessGroup final : public ProcessGroup {
 public:
  // Joins the group: blocks until all `size` ranks joined, or throws
  // Error(kDeadlineExceeded) after gloo.rendezvous_timeout.
  GlooProcessGroup(int rank, int size, ProcessGroupOptions opts, GlooOptions gloo);
  // Fails the collectives not yet started (kCancelled), ends a fingerprint
  // exchange in progress, and waits for the running collective (bounded by
  // its timeout; at once where a peer has left).
  ~GlooProcessGroup() override;
  void abort(const std::string& reason) override;

  std::string_view backend_name() const override { return "gloo"; }
  bool supports(CollectiveOp op) const override;
  bool supports_dtype(CollectiveOp op, ReduceOp reduce, DType dtype) const override;
  // Gloo's version, for the flight recorder's comm_lib_version.
  static std::string version();

 protected:
  std::vector<Tensor> run(const CollectiveCall& call, bool agree_only) override;

 private:
  // Marks the group broken (worker thread) and closes its connections.
  void break_group(std::string why);

  GlooOptions gloo_;
  std::shared_ptr<gloo::rendezvous::Store> prefix_store_;
  std::shared_ptr<gloo::Context> context_;
  // Buffers of fingerprint exchanges that timed out, kept (with their
  // memory) until the context goes, since a late peer may still write.
  std::vector<std::shared_ptr<void>> graveyard_;
  ExchangeAbort exchange_abort_;

  std::mutex mu_;        // aborted_
  std::string aborted_;  // abort()'s reason; empty until then
  std::string broken_;   // why the group is unusable; empty while healthy (worker thread only)
};

}  // namespace tensord::dist
