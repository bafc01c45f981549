// CapturedCollective: one collective captured into a device graph on its
// group's communicator (ProcessGroup::enqueue_captured; API.md 8), and the
// host work each launch of the graph does for it (ops/captured_work.h):
// before the launch it takes the group's next seq and a flight-recorder
// entry (scheduled), as the collective would uncaptured, so every rank's
// seqs stay the same and tensord_collective_ops_total counts it; at the
// launch the entry is started; once the group saw the stream finish the
// launch (ProcessGroup::wait_captured, bounded by the collective's timeout)
// it is completed, or retired failed. The graph stays valid only in the
// group it was captured in: a replaced group (a failed job's successor)
// needs a new capture. Used by one replay at a time.
#pragma once

#include <memory>
#include <string>

#include "ops/captured_work.h"
#include "ops/dist/collective.h"
#include "ops/tensor.h"
#include "streams/stream.h"

namespace tensord::dist {

class ProcessGroup;
class Work;

class CapturedCollective final : public CapturedWork {
 public:
  // `call`: prepared and enqueued on `stream` in `group`, its timeout
  // resolved; `out`: the buffer the graph writes its result to; `keep`:
  // what the backend needs kept while the graph lives (its communicator),
  // released with this object, after the graph (DeviceGraph's order).
  CapturedCollective(ProcessGroup& group, CollectiveCall call, Tensor out, Stream stream,
                     std::shared_ptr<void> keep = nullptr);

  bool valid_for(const OpContext& ctx) const override;
  void before_launch() override;
  void launched() override;
  void wait(const OpContext& ctx) override;
  void finished(bool ok) override;

  const CollectiveCall& call() const { return call_; }
  // The seq the last launch took (0: none yet).
  uint64_t last_seq() const { return last_seq_; }

 private:
  std::string what() const;

  ProcessGroup* group_;  // compared by address only, unless it is ctx.group
  uint64_t group_uid_;
  CollectiveCall call_;
  Tensor out_;
  Stream stream_;
  std::shared_ptr<void> keep_;
  std::shared_ptr<Work> work_;  // this launch's
  uint64_t last_seq_ = 0;
};

}  // namespace tensord::dist
