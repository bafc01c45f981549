#include "ops/dist/captured_collective.h"

#include <exception>
#include <utility>
#include <vector>

#include "ops/dist/process_group.h"
#include "ops/dist/work.h"
#include "ops/error.h"

namespace tensord::dist {

CapturedCollective::CapturedCollective(ProcessGroup& group, CollectiveCall call, Tensor out, Stream stream,
                                       std::shared_ptr<void> keep)
    : group_(&group),
      group_uid_(group.uid()),
      call_(std::move(call)),
      out_(std::move(out)),
      stream_(stream),
      keep_(std::move(keep)) {
  TENSORD_ASSERT(call_.timeout.count() > 0);
}

bool CapturedCollective::valid_for(const OpContext& ctx) const {
  // The group is dereferenced only once it is known to be ctx's (alive).
  return ctx.group == group_ && ctx.group->uid() == group_uid_ && ctx.stream == stream_;
}

std::string CapturedCollective::what() const {
  std::string s = std::string(group_->backend_name()) + " " + std::string(collective_op_name(call_.op));
  if (work_) s += " (seq " + std::to_string(work_->seq()) + ")";
  return s + " captured in a device graph, group " + group_->name();
}

void CapturedCollective::before_launch() {
  TENSORD_ASSERT(!work_);
  group_->check_captured_launch(what());
  work_ = group_->record_replayed(call_);
  last_seq_ = work_->seq();
}

void CapturedCollective::launched() {
  if (work_) work_->mark_started();
}

void CapturedCollective::wait(const OpContext& ctx) {
  group_->wait_captured(stream_, call_.timeout, ctx.cancelled, what());
}

void CapturedCollective::finished(bool ok) {
  if (!work_) return;
  std::shared_ptr<Work> w = std::move(work_);
  work_.reset();
  if (ok) {
    w->finish(std::vector<Tensor>{out_});
  } else {
    w->fail(std::make_exception_ptr(
        Error(ErrorCode::kInternal, "the device graph launch holding " + std::string(collective_op_name(call_.op)) +
                                        " (seq " + std::to_string(w->seq()) + ") did not finish")));
  }
}

}  // namespace tensord::dist
