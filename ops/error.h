// Error model shared by every layer (API.md section 2).
// User errors are thrown as tensord::Error carrying a stable code; bugs are
// TENSORD_ASSERT. The mapping code -> HTTP status lives in exactly one place:
// api/error_reply.cpp.
#pragma once

#include <exception>
#include <string>
#include <string_view>
#include <utility>

namespace tensord {

enum class ErrorCode {
  kBadRequest,
  kInvalidProgram,
  kUnauthenticated,
  kForbidden,
  kNotFound,
  kUnknownOp,
  kConflict,
  kPayloadTooLarge,
  kShapeMismatch,
  kDtypeMismatch,
  kInvalidArgument,
  kNumericalError,
  kQuotaExceeded,
  kQueueFull,
  kCancelled,
  kInternal,
  kUnavailable,
  kDeadlineExceeded,
  kUnsupported,  // "backend X does not support Y": 422 invalid_argument on the wire
};

// The stable machine-readable code string of API.md section 2.
std::string_view error_code_name(ErrorCode code);

class Error : public std::exception {
 public:
  Error(ErrorCode code, std::string message, std::string node = {})
      : code_(code), message_(std::move(message)), node_(std::move(node)) {}

  ErrorCode code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  const std::string& node() const noexcept { return node_; }
  // Seconds a client should wait before retrying (429 Retry-After); 0: unset.
  int retry_after_s() const noexcept { return retry_after_s_; }
  const char* what() const noexcept override { return message_.c_str(); }

  // Returns a copy tagged with the program node it came from (if untagged).
  Error with_node(const std::string& node) const {
    Error e(code_, message_, node_.empty() ? node : node_);
    e.retry_after_s_ = retry_after_s_;
    return e;
  }

 protected:
  void set_retry_after_s(int s) noexcept { retry_after_s_ = s; }

 private:
  ErrorCode code_;
  std::string message_;
  std::string node_;
  int retry_after_s_ = 0;
};

[[noreturn]] void throw_error(ErrorCode code, std::string message);

// Internal invariant: a failure is a bug (500 internal), never user input.
[[noreturn]] void assert_fail(const char* expr, const char* file, int line);

}  // namespace tensord

#define TENSORD_ASSERT(cond)                                        \
  do {                                                              \
    if (!(cond)) ::tensord::assert_fail(#cond, __FILE__, __LINE__); \
  } while (0)

// User-facing check: throws Error(code, msg) when cond is false.
#define TENSORD_CHECK(cond, code, msg)                                      \
  do {                                                                      \
    if (!(cond)) ::tensord::throw_error(::tensord::ErrorCode::code, (msg)); \
  } while (0)
