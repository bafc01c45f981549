#include "ops/error.h"

namespace tensord {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadRequest:
      return "bad_request";
    case ErrorCode::kInvalidProgram:
      return "invalid_program";
    case ErrorCode::kUnauthenticated:
      return "unauthenticated";
    case ErrorCode::kForbidden:
      return "forbidden";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kUnknownOp:
      return "unknown_op";
    case ErrorCode::kConflict:
      return "conflict";
    case ErrorCode::kPayloadTooLarge:
      return "payload_too_large";
    case ErrorCode::kShapeMismatch:
      return "shape_mismatch";
    case ErrorCode::kDtypeMismatch:
      return "dtype_mismatch";
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNumericalError:
      return "numerical_error";
    case ErrorCode::kQuotaExceeded:
      return "quota_exceeded";
    case ErrorCode::kQueueFull:
      return "queue_full";
    case ErrorCode::kCancelled:
      return "cancelled";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kDeadlineExceeded:
      return "deadline_exceeded";
    case ErrorCode::kUnsupported:
      return "invalid_argument";
  }
  return "internal";
}

void throw_error(ErrorCode code, std::string message) {
  throw Error(code, std::move(message));
}

void assert_fail(const char* expr, const char* file, int line) {
  throw Error(ErrorCode::kInternal,
              std::string("internal assertion failed: ") + expr + " at " + file + ":" + std::to_string(line));
}

}  // namespace tensord
