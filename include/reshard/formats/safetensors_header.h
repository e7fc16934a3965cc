// The safetensors header: tensor entries and metadata, parsed and validated
// by every rule the safetensors reference's reader checks, in its order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"

namespace reshard::safetensors {

// Bytes of the little-endian header length that opens every file.
inline constexpr uint64_t kLengthPrefixBytes = 8;

// The largest header (JSON plus padding) the reference accepts or writes.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// A shape as a safetensors header spells it: dimensions up to 2^64-1, as the
// reference's usize. Past 2^63-1 only a zero-element tensor can be valid.
using Dims = std::vector<uint64_t>;

// Number of elements of `dims` (1 for a scalar); Error(kOverflow) naming `what`.
uint64_t element_count(const Dims& dims, std::string_view what);
// The dims as a layout Shape; Error(kUnsupported) naming `tensor` when a
// dimension does not fit int64 (only zero-element tensors can have one).
Shape layout_shape(const Dims& dims, std::string_view tensor);
// A layout Shape as dims; Error(kInvalidArgument) for a negative extent.
Dims dims_of(const Shape& shape);

// One tensor entry: where its bytes are and how to read them.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Dims shape;          // [] is a scalar; zero-size dimensions are allowed
  uint64_t begin = 0;  // data_offsets[0], relative to the start of the data buffer
  uint64_t end = 0;    // data_offsets[1], one past the last byte

  uint64_t byte_size() const { return end - begin; }
  // Number of elements (1 for a scalar); fits once the header is validated.
  uint64_t elements() const;

  bool operator==(const TensorInfo&) const = default;
};

// `__metadata__`: string keys to string values, in the order of the file.
using Metadata = std::vector<std::pair<std::string, std::string>>;

// A validated header: tensors in data order, metadata, and a lookup by name.
class Header {
 public:
  Header() = default;
  // Takes tensors already in data order. Throws Error(kDuplicateTensor) on a
  // repeated name. Does not re-run the file rules: parse_header does that.
  Header(uint64_t json_bytes, std::optional<Metadata> metadata, std::vector<TensorInfo> tensors);

  // Names the JSON gave more than once (the last entry of each was kept, as
  // the reference's map keeps it), in the order of their first repeat.
  const std::vector<std::string>& repeated_names() const { return repeated_names_; }
  void set_repeated_names(std::vector<std::string> names) { repeated_names_ = std::move(names); }

  // N: bytes of JSON (padding included) after the 8-byte length.
  uint64_t json_bytes() const { return json_bytes_; }
  // File offset of the data buffer: 8 + N.
  uint64_t data_start() const { return kLengthPrefixBytes + json_bytes_; }
  // Bytes of the data buffer (the last tensor's end; 0 with no tensors).
  uint64_t data_bytes() const;
  // The exact file size this header describes.
  uint64_t file_size() const { return data_start() + data_bytes(); }

  // nullopt when the header has no `__metadata__` (or it is null).
  const std::optional<Metadata>& metadata() const { return metadata_; }
  // Every tensor, sorted by (begin, end): the order of their bytes in the file.
  std::span<const TensorInfo> tensors() const { return tensors_; }

  // The tensor called `name`, or nullptr.
  const TensorInfo* find(std::string_view name) const;
  // The tensor called `name`; throws Error(kMissingTensor) naming it.
  const TensorInfo& at(std::string_view name) const;

  // Absolute file offset of a tensor's first byte, overflow-checked.
  uint64_t file_offset(const TensorInfo& tensor) const;

 private:
  void build_index();

  uint64_t json_bytes_ = 0;
  std::optional<Metadata> metadata_;
  std::vector<TensorInfo> tensors_;
  std::vector<uint32_t> slots_;  // open-addressing hash of names: index + 1, 0 = empty
  std::vector<std::string> repeated_names_;
};

// Checks 1-3 of the spec on the file's first bytes (at least 8 of them when the
// file has 8) and its size; returns N. Errors name `file`:
// kHeaderTooSmall, kHeaderTooLarge, kInvalidHeaderLength.
uint64_t parse_length_prefix(std::span<const std::byte> first_bytes, uint64_t file_size,
                             std::string_view file);

// Checks 4-9 of the spec on the N header bytes that follow the prefix, for a
// file of `file_size` bytes: kInvalidHeaderUtf8, kInvalidHeaderJson,
// kInvalidOffset, kValidationOverflow, kMisalignedSlice, kInvalidTensorInfo,
// kIncompleteBuffer. Errors name `file` and, where there is one, the tensor.
// As in the reference: rules 6-8 run tensor by tensor in (begin, end) order;
// the JSON is read as serde_json reads it (nesting past 127 levels and numbers
// past a double refused, an entry may also be the list [dtype, shape,
// offsets], a repeated metadata key or tensor name keeps its last value).
Header parse_header_json(std::span<const std::byte> json, uint64_t file_size,
                         std::string_view file);

// Every check, 1-9, on a file's leading bytes: `leading` holds the whole
// header (8 + N bytes, or the whole file if shorter) and `file_size` is the
// size of the whole file.
Header parse_header(std::span<const std::byte> leading, uint64_t file_size, std::string_view file);

}  // namespace reshard::safetensors
