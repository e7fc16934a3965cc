// One object written front to back by one writer, its size known before the
// first byte: a safetensors file streamed tensor by tensor, a small config.
// A local file is a hidden sibling, fsynced and renamed into place at commit
// (Store::write_all's protocol); an object in a store is a parallel upload
// that this writer alone fills, a part uploaded while the next is filled.
// Nothing appears at the destination before commit(), and a writer destroyed
// before it leaves nothing behind (no file, no part, no pending upload).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "reshard/storage/location.h"
#include "reshard/storage/parallel_upload.h"
#include "reshard/storage/part_writer.h"
#include "reshard/storage/store.h"

namespace reshard::storage {

// How an object is cut and uploaded, when it goes to a store (local files
// ignore both).
struct UploadOptions {
  // Bytes per part (0: the store's default); within the store's rules
  // (PartLayout::plan's errors otherwise).
  uint64_t part_bytes = 0;
  // Parts uploaded at once: memory is about this many parts plus the one
  // being filled.
  uint32_t parts_in_flight = 4;
};

class ObjectWriter {
 public:
  // Starts writing `size` bytes to `destination`, first removing what killed
  // writers of it left (Store::abort_stale_uploads). With IfExists::kFail an
  // object already there is Error(kAlreadyExists), now and at commit.
  ObjectWriter(const Location& destination, uint64_t size, const UploadOptions& options = {},
               IfExists if_exists = IfExists::kReplace);
  ObjectWriter(const ObjectWriter&) = delete;
  ObjectWriter& operator=(const ObjectWriter&) = delete;
  // Aborts unless commit() ran.
  ~ObjectWriter();

  // Appends `bytes`. Error(kInvalidArgument) naming the object when they pass
  // the size given; the store's errors (the first failed part's) otherwise.
  void write(std::span<const std::byte> bytes);
  // Makes the object appear whole. Error(kInvalidArgument) when fewer bytes
  // than the size were written; on any failure nothing appears.
  void commit();
  // Discards everything written; idempotent.
  void abort() noexcept;

  const Location& destination() const { return destination_; }
  uint64_t size() const { return size_; }
  uint64_t written() const { return written_; }

 private:
  Location destination_;
  uint64_t size_ = 0;
  uint64_t written_ = 0;
  std::shared_ptr<Store> store_;
  std::unique_ptr<ParallelUpload> upload_;
  std::unique_ptr<PartWriter> parts_;  // objects only; local files take bytes at any offset
  std::optional<uint64_t> pending_;    // the upload's entry in pending_uploads.h
  bool done_ = false;
};

}  // namespace reshard::storage
