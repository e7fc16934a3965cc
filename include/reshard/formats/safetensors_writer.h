// Writing safetensors files from a FileLayout: one tensor after another, to
// a local file or an object (StreamWriter), or any byte range of a local file
// from any thread or process (PositionalWriter).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "reshard/formats/safetensors_layout.h"
#include "reshard/layout/box.h"
#include "reshard/storage/location.h"
#include "reshard/storage/object_writer.h"

namespace reshard::formats_detail {
class AtomicFile;  // the temporary sibling each writer fills (internal)
}  // namespace reshard::formats_detail

namespace reshard::safetensors {

// Writes a file front to back: the header, then each tensor's bytes in layout
// order, in pieces of any size, to a local file or an object in a store
// (storage::ObjectWriter: an object is uploaded in parts, one uploading while
// the next is filled). Memory is bounded by the buffer (and, for an object,
// the parts in flight), not the file. Nothing appears at the destination
// until commit(); destroying the writer before commit leaves nothing behind.
class StreamWriter {
 public:
  static constexpr size_t kDefaultBufferBytes = size_t{4} << 20;

  StreamWriter(const storage::Location& where, FileLayout layout, size_t buffer_bytes = kDefaultBufferBytes,
               const storage::UploadOptions& upload = {});
  StreamWriter(StreamWriter&&) noexcept;
  StreamWriter& operator=(StreamWriter&&) noexcept;
  ~StreamWriter();

  // Appends the next bytes of the data buffer (tensors back to back, in
  // layout().header().tensors() order). Throws Error(kInvalidArgument) when
  // more bytes arrive than the layout holds.
  void write(std::span<const std::byte> bytes);
  // Writes all of tensor `name`, which must start where the writer stands (the
  // next one in layout order) and get exactly its byte size
  // (Error(kInvalidArgument) otherwise; Error(kMissingTensor) for an unknown name).
  void write_tensor(std::string_view name, std::span<const std::byte> bytes);
  // The tensor the next byte belongs to, or nullptr when every byte is written.
  const TensorInfo* next_tensor() const;
  // Checks every byte arrived, then makes the file appear whole (a local
  // file: fsync and rename; an object: the upload completed).
  void commit();

  const FileLayout& layout() const { return layout_; }
  const storage::Location& location() const;
  // The destination's text ("model.safetensors", "s3://b/model.safetensors").
  const std::filesystem::path& path() const { return path_; }

 private:
  void flush();

  FileLayout layout_;
  std::filesystem::path path_;
  std::unique_ptr<storage::ObjectWriter> file_;
  std::string buffer_;
  size_t buffer_bytes_;
  uint64_t data_written_ = 0;  // data-buffer bytes accepted so far
};

// Writes byte ranges of a planned file at their final offsets (pwrite), in
// any order, from many threads (one writer shared) or many processes (one
// writer each). Protocol: one process create()s (this sizes the temporary and
// writes the header); the others join() after that; everyone writes its
// ranges and calls sync(); once all are done the creator commit()s. A creator
// destroyed before commit removes the temporary, so an abandoned write never
// leaves a file at the final path.
class PositionalWriter {
 public:
  // The committing side: creates the temporary sibling of `path`, sized to the
  // layout, with the header written.
  static PositionalWriter create(const std::filesystem::path& path, FileLayout layout);
  // A participant: opens the temporary the creator made. Never commits or removes it.
  static PositionalWriter join(const std::filesystem::path& path, FileLayout layout);

  // Writes `bytes` into tensor `name` starting `offset` bytes into its data.
  // Error(kMissingTensor) for an unknown name, Error(kInvalidArgument) for a
  // range past the tensor's end. Thread safe.
  void write(std::string_view name, uint64_t offset, std::span<const std::byte> bytes) const;
  // Writes the box `box` (global coordinates of the tensor) whose elements are
  // `bytes`, dense and row-major in the box's shape: each contiguous run goes
  // to its place. Sub-byte dtypes need runs on whole bytes (Error(kUnsupported)).
  // Thread safe.
  void write_box(std::string_view name, const Box& box, std::span<const std::byte> bytes) const;
  // Flushes this writer's bytes to storage; call before telling the creator you are done.
  void sync() const;
  // Creator only: fsync, rename into place, fsync the folder.
  void commit();
  // Creator: removes the temporary. Participant: closes. Idempotent.
  void abandon() noexcept;

  PositionalWriter(PositionalWriter&&) noexcept;
  PositionalWriter& operator=(PositionalWriter&&) noexcept;
  ~PositionalWriter();

  const FileLayout& layout() const { return layout_; }
  const std::filesystem::path& path() const;

 private:
  PositionalWriter(FileLayout layout, formats_detail::AtomicFile file);

  FileLayout layout_;
  std::unique_ptr<formats_detail::AtomicFile> file_;
};

// Writes a whole file (local or an object) in one call from (spec, bytes)
// pairs given in any order; a convenience over StreamWriter for small files
// and tests.
struct TensorData {
  TensorSpec spec;
  std::span<const std::byte> bytes;
};
void write_file(const storage::Location& where, std::span<const TensorData> tensors,
                std::optional<Metadata> metadata = default_metadata());

}  // namespace reshard::safetensors
