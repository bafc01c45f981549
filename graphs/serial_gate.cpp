#include "graphs/serial_gate.h"

#include <utility>

namespace tensord {

bool SerialGate::enter(std::function<void()> later) {
  std::lock_guard lock(mu_);
  if (!busy_) {
    busy_ = true;
    return true;
  }
  queue_.push_back(std::move(later));
  return false;
}

void SerialGate::release() {
  std::function<void()> next;
  {
    std::lock_guard lock(mu_);
    if (queue_.empty()) {
      busy_ = false;
      return;
    }
    next = std::move(queue_.front());
    queue_.pop_front();  // busy_ stays: `next` is admitted
  }
  next();
}

size_t SerialGate::waiting() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

}  // namespace tensord
