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
    case ErrorCode::kHeaderTooSmall: return "header_too_small";
    case ErrorCode::kHeaderTooLarge: return "header_too_large";
    case ErrorCode::kInvalidHeaderLength: return "invalid_header_length";
    case ErrorCode::kInvalidHeaderUtf8: return "invalid_header_utf8";
    case ErrorCode::kInvalidHeaderJson: return "invalid_header_json";
    case ErrorCode::kInvalidOffset: return "invalid_offset";
    case ErrorCode::kValidationOverflow: return "validation_overflow";
    case ErrorCode::kInvalidTensorInfo: return "invalid_tensor_info";
    case ErrorCode::kIncompleteBuffer: return "incomplete_buffer";
    case ErrorCode::kDuplicateTensor: return "duplicate_tensor";
    case ErrorCode::kMissingTensor: return "missing_tensor";
    case ErrorCode::kInvalidIndex: return "invalid_index";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kMisalignedSlice: return "misaligned_slice";
    case ErrorCode::kInvalidManifest: return "invalid_manifest";
    case ErrorCode::kChecksumMismatch: return "checksum_mismatch";
    case ErrorCode::kAlreadyExists: return "already_exists";
    case ErrorCode::kInvalidConfig: return "invalid_config";
  }
  return "unknown";
}

Error::Error(ErrorCode code, std::string message)
    : std::runtime_error(std::move(message)), code_(code) {}

Error Error::with_context(std::string_view context) const {
  std::string message(context);
  message += ": ";
  message += what();
  return Error(code_, std::move(message));
}

}  // namespace reshard
