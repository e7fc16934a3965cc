#include "reshard/layout/error.h"

#include <utility>

namespace reshard {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kParse: return "parse";
    case ErrorCode::kOverflow: return "overflow";
    case ErrorCode::kIndivisible: return "indivisible";
    case ErrorCode::kDuplicateAxis: return "duplicate_axis";
    case ErrorCode::kUnknownAxis: return "unknown_axis";
    case ErrorCode::kRank: return "rank";
    case ErrorCode::kNestedTuple: return "nested_tuple";
    case ErrorCode::kInvalidMesh: return "invalid_mesh";
    case ErrorCode::kUnknownDevice: return "unknown_device";
    case ErrorCode::kInvalidPlan: return "invalid_plan";
    case ErrorCode::kTransport: return "transport";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kPeerFailed: return "peer_failed";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kInvalidFile: return "invalid_file";
    case ErrorCode::kDuplicateTensor: return "duplicate_tensor";
    case ErrorCode::kMissingTensor: return "missing_tensor";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kChecksumMismatch: return "checksum_mismatch";
    case ErrorCode::kAlreadyExists: return "already_exists";
    case ErrorCode::kInvalidConfig: return "invalid_config";
  }
  return "unknown";
}

Error::Error(ErrorKind kind, std::string message) : std::runtime_error(std::move(message)), kind_(kind) {}

Error Error::with_context(std::string_view context) const {
  std::string message(context);
  message += ": ";
  message += what();
  return Error(kind_, std::move(message));
}

}  // namespace reshard
