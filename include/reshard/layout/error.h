// Typed errors shared by every layer: a code to branch on, a message to print.
#pragma once

#include <cstddef>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace reshard {

// What went wrong, coarse enough to branch on and stable enough to test. The
// codes are generic; which rule of a file format a file breaks is the
// layer's own detail (an ErrorKind of kInvalidFile, see formats/file_rules.h).
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
  // Stored data.
  kIo,                // the operating system refused a read or a write
  kInvalidFile,       // a file that breaks a rule of its format (the ErrorKind names the rule)
  kDuplicateTensor,   // two tensors under one name
  kMissingTensor,     // a tensor (or a module, a key) asked for that is not there
  kUnsupported,       // well formed, but not something reshard does (a dtype, a kind of adapter)
  kChecksumMismatch,  // stored bytes whose checksum differs from the one recorded for them
  kAlreadyExists,     // the output is there and the caller did not ask to replace it (each front end says how)
  kInvalidConfig,     // an input file of settings (config.json, adapter_config.json, a map or rules file) that is malformed
};

// The number of codes: they run from 0 to kErrorCodeCount - 1.
inline constexpr size_t kErrorCodeCount = static_cast<size_t>(ErrorCode::kInvalidConfig) + 1;

// A short, stable, snake_case name for a code ("indivisible", "unknown_axis").
std::string_view error_code_name(ErrorCode code);

// A code and its stable name: the code's own, or, for an error a layer tells
// apart more finely (which rule of the safetensors format a header breaks),
// that layer's name for it ("header_too_small"). Front ends map the name to
// what they show (the Python exception class); callers branch on either.
struct ErrorKind {
  ErrorCode code;
  std::string_view name;  // static storage: a literal

  ErrorKind(ErrorCode generic) : code(generic), name(error_code_name(generic)) {}  // NOLINT: a code is a kind
  constexpr ErrorKind(ErrorCode generic, std::string_view detail) : code(generic), name(detail) {}

  friend bool operator==(const ErrorKind& a, const ErrorKind& b) { return a.code == b.code && a.name == b.name; }
  friend std::ostream& operator<<(std::ostream& out, const ErrorKind& kind) { return out << kind.name; }
};

// The one exception type reshard throws. Context is prepended as the error
// travels up ("reading model.safetensors: tensor w: ..."), as TensorStore does.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message);

  ErrorCode code() const noexcept { return kind_.code; }
  const ErrorKind& kind() const noexcept { return kind_; }
  std::string_view name() const noexcept { return kind_.name; }

  // The same error with "context: " in front of its message.
  Error with_context(std::string_view context) const;

 private:
  ErrorKind kind_;
};

}  // namespace reshard
