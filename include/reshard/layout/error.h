// Typed errors shared by every layer: a code to branch on, a message to print.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace reshard {

// What went wrong, coarse enough to branch on and stable enough to test.
enum class ErrorCode {
  kInvalidArgument,  // a value the caller passed makes no sense
  kParse,            // text (a flag, a spec, a size) could not be parsed
  kOverflow,         // a size or offset computed from input overflows
  // Sharding (Sharding::validate): each names the spec, axis or dimension.
  kIndivisible,
  kDuplicateAxis,
  kUnknownAxis,
  kRank,
  kNestedTuple,
  kInvalidMesh,
  kUnknownDevice,
  // Plans and execution.
  kInvalidPlan,
  kTransport,
  kTimeout,
  kPeerFailed,
  // Files (the safetensors reader's checks, in the order it makes them).
  kIo,
  kHeaderTooSmall,
  kHeaderTooLarge,
  kInvalidHeaderLength,
  kInvalidHeaderUtf8,
  kInvalidHeaderJson,
  kInvalidOffset,
  kValidationOverflow,
  kInvalidTensorInfo,
  kIncompleteBuffer,
  kDuplicateTensor,
  kMissingTensor,
  kInvalidIndex,
  kUnsupported,
  kMisalignedSlice,   // a sub-byte tensor whose bits do not fill whole bytes (the reference's kind)
  kInvalidManifest,   // a checkpoint manifest that is malformed, inconsistent or of an unknown version
  kChecksumMismatch,  // stored bytes whose checksum differs from the one recorded for them
  kAlreadyExists,     // the output is there and the caller did not ask to replace it (each front end says how)
  kInvalidConfig,     // an input file of settings (config.json, adapter_config.json, a map or rules file) that is malformed
};

// A short, stable, snake_case name for a code ("indivisible", "unknown_axis").
std::string_view error_code_name(ErrorCode code);

// The one exception type reshard throws. Context is prepended as the error
// travels up ("reading model.safetensors: tensor w: ..."), as TensorStore does.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message);

  ErrorCode code() const noexcept { return code_; }

  // The same error with "context: " in front of its message.
  Error with_context(std::string_view context) const;

 private:
  ErrorCode code_;
};

}  // namespace reshard
