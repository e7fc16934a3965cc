// The layout of a safetensors file to be written: header bytes and every
// tensor's offset, computed up front exactly as the reference writer does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/formats/safetensors_header.h"
#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"

namespace reshard::safetensors {

// What the writer needs to know of a tensor before any of its bytes exist.
struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  Dims shape;
  bool operator==(const TensorSpec&) const = default;
};

// The spec's shape as the layout layer counts it; Error(kInvalidArgument)
// naming the tensor for a dimension of 2^63 or more.
inline Shape layout_shape(const TensorSpec& spec) { return layout_shape(spec.shape, spec.name); }

// `{"format": "pt"}`: what Hugging Face tools write and some loaders require.
Metadata default_metadata();

// A planned file. The same specs and metadata give the same layout on every
// process, so writers agree on offsets without talking to each other.
class FileLayout {
 public:
  // Orders tensors as the reference does (dtype descending in enum order, then
  // name ascending bytewise), places them back to back and serializes the
  // header: compact JSON, `__metadata__` first (omitted when nullopt), padded
  // with spaces to a multiple of 8. Throws Error(kInvalidArgument) for a tensor
  // named `__metadata__` or a sub-byte tensor that does not fill whole bytes,
  // Error(kDuplicateTensor) for a repeated name, Error(kHeaderTooLarge) past
  // 100,000,000 header bytes, Error(kOverflow) when a size overflows.
  static FileLayout plan(std::vector<TensorSpec> tensors,
                         std::optional<Metadata> metadata = default_metadata());

  // The parsed view of what will be written: tensors in data order with offsets.
  const Header& header() const { return header_; }
  // The file's first bytes: 8-byte length, JSON, padding (header().data_start() bytes).
  const std::string& header_bytes() const { return header_bytes_; }
  // The exact size of the finished file.
  uint64_t file_size() const { return header_.file_size(); }

 private:
  Header header_;
  std::string header_bytes_;
};

}  // namespace reshard::safetensors
