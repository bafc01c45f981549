#include "graphs/fallback_executable.h"

namespace tensord {

ExecResult FallbackExecutable::run(const std::map<std::string, Tensor>& inputs, const ExecOptions& opts) {
  if (!fell_back()) {
    try {
      return primary_->run(inputs, opts);
    } catch (const Error& e) {
      if (!falls_back_(e)) throw;
      fell_back_.store(true, std::memory_order_relaxed);
    }
  }
  return secondary_->run(inputs, opts);
}

}  // namespace tensord
