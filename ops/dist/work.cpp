#include "ops/dist/work.h"

#include <utility>

#include "ops/dist/flight_recorder.h"
#include "ops/error.h"

namespace tensord::dist {

Work::Work(std::string group, CollectiveOp op, uint64_t seq, std::shared_ptr<FlightRecorder> recorder,
           uint64_t record_id)
    : group_(std::move(group)), op_(op), seq_(seq), recorder_(std::move(recorder)), record_id_(record_id) {}

bool Work::is_completed() const {
  std::lock_guard lock(mu_);
  return done_;
}

bool Work::is_success() const {
  std::lock_guard lock(mu_);
  return done_ && !error_;
}

void Work::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return done_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return done_; })) {
    throw Error(ErrorCode::kDeadlineExceeded, std::string(collective_op_name(op_)) + " (seq " + std::to_string(seq_) +
                                                  ") in group " + group_ + " did not finish within " +
                                                  std::to_string(timeout.count()) + " ms of waiting");
  }
  if (error_) std::rethrow_exception(error_);
}

const std::vector<Tensor>& Work::outputs() const {
  std::lock_guard lock(mu_);
  TENSORD_CHECK(done_ && !error_, kInvalidArgument,
                std::string(collective_op_name(op_)) + " (seq " + std::to_string(seq_) + ") has no outputs yet");
  return outputs_;
}

const Tensor& Work::result() const {
  const auto& outs = outputs();
  TENSORD_CHECK(!outs.empty(), kInvalidArgument, std::string(collective_op_name(op_)) + " has no output");
  return outs[0];
}

std::exception_ptr Work::exception() const {
  std::lock_guard lock(mu_);
  return error_;
}

void Work::mark_started() {
  if (recorder_) recorder_->started(record_id_);
}

void Work::finish(std::vector<Tensor> outputs) {
  if (recorder_) {
    std::vector<Shape> shapes;
    shapes.reserve(outputs.size());
    for (const auto& t : outputs) shapes.push_back(t.shape());
    recorder_->completed(record_id_, &shapes);
  }
  {
    std::lock_guard lock(mu_);
    outputs_ = std::move(outputs);
    done_ = true;
  }
  cv_.notify_all();
}

void Work::fail(std::exception_ptr error) {
  if (recorder_) recorder_->retired_failed(record_id_);
  {
    std::lock_guard lock(mu_);
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
}

}  // namespace tensord::dist
