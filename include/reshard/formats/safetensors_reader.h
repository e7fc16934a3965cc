// Reading safetensors files: the whole header is validated at open, then
// tensors are handed out as zero-copy views (mmap) or read with pread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "reshard/formats/safetensors_header.h"
#include "reshard/layout/box.h"
#include "reshard/storage/location.h"

namespace reshard::safetensors {

// How tensor bytes are fetched from a local file. kMmap maps the file and
// hands out views into it; kPread reads with positional reads (faster on
// network file systems). Objects in a store (s3://, gs://) are always read by
// byte ranges, nearby runs of a box joined and many fetched at once, so a
// File opened there reports kPread whatever was asked, and has no views.
enum class ReadMode { kMmap, kPread };

// An open, validated safetensors file. Copies share the open file. Every
// const method is thread safe. Errors name the file and, where there is one,
// the tensor. As with any mapping, the file must not shrink while it is open.
class File {
 public:
  // Opens `where` (a local path or an object) and validates every header rule
  // before returning. Throws the spec's typed errors (kHeaderTooSmall ...
  // kIncompleteBuffer), or kIo (with storage_error.h's kinds for objects) when
  // the file cannot be opened, read or mapped.
  static File open(const storage::Location& where, ReadMode mode = ReadMode::kMmap);

  // Where the file is; path() is its text ("model.safetensors", "s3://b/k").
  const storage::Location& location() const;
  const std::filesystem::path& path() const;
  ReadMode mode() const;
  const Header& header() const;
  // Tensors in data order (shortcut for header().tensors()).
  std::span<const TensorInfo> tensors() const { return header().tensors(); }
  // nullptr / Error(kMissingTensor) when there is no tensor of that name.
  const TensorInfo* find(std::string_view name) const { return header().find(name); }
  const TensorInfo& tensor(std::string_view name) const { return header().at(name); }
  // `__metadata__`, or nullopt.
  const std::optional<Metadata>& metadata() const { return header().metadata(); }

  // The tensor's bytes inside the mapping (kMmap only; Error(kUnsupported) in
  // kPread mode). Valid while any copy of this File lives.
  std::span<const std::byte> view(const TensorInfo& tensor) const;
  // Copies `out.size()` bytes of the tensor starting `offset` bytes into it.
  // Error(kInvalidArgument) when the range passes the tensor's end.
  void read(const TensorInfo& tensor, uint64_t offset, std::span<std::byte> out) const;
  // Copies the whole tensor; `out` must be exactly its byte size.
  void read(const TensorInfo& tensor, std::span<std::byte> out) const;
  // Copies the box `box` of the tensor into `out`, dense and row-major in the
  // box's shape, reading only the byte runs the box covers. `out` must be
  // exactly the box's byte size. Sub-byte dtypes need every run to start and
  // end on a byte (Error(kUnsupported) otherwise).
  void read_box(const TensorInfo& tensor, const Box& box, std::span<std::byte> out) const;

  // Byte size of the box of a tensor of `dtype`; Error(kUnsupported) when a
  // sub-byte box does not fill whole bytes.
  static uint64_t box_bytes(DType dtype, const Box& box);

 private:
  struct State;
  explicit File(std::shared_ptr<const State> state);

  std::shared_ptr<const State> state_;
};

}  // namespace reshard::safetensors
