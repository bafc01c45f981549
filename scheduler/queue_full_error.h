// 429 queue_full carrying the Retry-After estimate (seconds, in [1, 60]).
// Catching `const Error&` still works; the server reads retry_after_seconds()
// with a dynamic_cast and passes it to error_reply().
#pragma once

#include <string>
#include <utility>

#include "ops/error.h"

namespace tensord {

class QueueFullError : public Error {
 public:
  QueueFullError(std::string message, int retry_after_seconds)
      : Error(ErrorCode::kQueueFull, std::move(message)), retry_after_seconds_(retry_after_seconds) {
    set_retry_after_s(retry_after_seconds);
  }

  int retry_after_seconds() const noexcept { return retry_after_seconds_; }

 private:
  int retry_after_seconds_;
};

}  // namespace tensord
