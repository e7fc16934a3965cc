// A checkpoint in an object store (s3://, gs://, memory://), which has no
// rename and no folders: the checkpoint appears when its manifest does.
//
// 1. Process 0 checks the destination before anything is uploaded: empty, a
//    checkpoint to replace (only with `replace`), or only data files a failed
//    save left; never anything else.
// 2. Every process that writes chunks removes the stale uploads a killed save
//    left for its data file, then uploads the file as one parallel upload that
//    it alone fills, a bounded number of parts at once. It is not completed
//    yet: until every process has all of its parts in, a failure anywhere
//    aborts every upload and leaves the destination as it was.
// 3. Once all agree, process 0 removes the old manifest (when replacing); then
//    every process completes its data file; then process 0 writes the
//    manifest, last, and removes the old data files the new manifest does not
//    list (data-NNNNN.safetensors only; other objects stay).
// A failure after step 2 has every process remove its completed data file,
// so nothing that looks like a checkpoint is left, and no upload is pending.
//
// What a reader sees meanwhile: the old checkpoint, whole, until step 3
// starts; then no checkpoint (no manifest) while the data files are replaced,
// never an old manifest with a new data file; then the new checkpoint, whole
// (and, for a moment, old data files it does not list and never reads). A
// reader that opened the old checkpoint earlier and reads chunks after their
// data file was replaced fails on the checksums (and without verification may
// read the new bytes). A failed replace after step 2 loses the old checkpoint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "pipelines/checkpoint/data_file_writer.h"
#include "reshard/formats/checkpoint_manifest.h"
#include "reshard/storage/part_writer.h"
#include "reshard/storage/store.h"

namespace reshard::pipelines_detail {

// Process 0, step 1. Returns whether a checkpoint is there (to replace).
// Error(kAlreadyExists) for a checkpoint without `replace`;
// Error(kInvalidArgument) for an object named `folder` or a prefix holding
// anything but a checkpoint or data files.
bool check_object_destination(const storage::Location& folder, bool replace);

// Step 2: this process's data file, uploaded in parts as its bytes arrive in
// order; completed (made to appear) only by complete(). Registered as a
// pending upload, so that a command told to stop aborts it.
class DataObject final : public DataFileSink {
 public:
  // Aborts the uploads a killed save left for `object`, then starts the
  // upload of its `size` bytes in parts of `part_bytes` (0: the store's
  // default), `parts_in_flight` at once.
  DataObject(storage::Location object, uint64_t size, uint64_t part_bytes, uint32_t parts_in_flight);
  DataObject(const DataObject&) = delete;
  DataObject& operator=(const DataObject&) = delete;
  // Aborts the upload unless it was completed.
  ~DataObject() override;

  std::string name() const override { return object_.str(); }
  void append(std::span<const std::byte> bytes) override;
  // Waits for every part's upload.
  void finish() override;

  // Step 3: the object appears (its upload is aborted if that fails).
  void complete();
  // After a failure anywhere: aborts the upload, or removes the object once
  // completed. Never throws.
  void discard() noexcept;

 private:
  storage::Location object_;
  std::shared_ptr<storage::Store> store_;
  std::unique_ptr<storage::ParallelUpload> upload_;
  uint64_t pending_ = 0;  // its entry in storage's pending uploads until completed (ids start at 1)
  std::unique_ptr<storage::PartWriter> writer_;  // after upload_: destroyed first
  std::vector<storage::PartReceipt> receipts_;
  uint64_t position_ = 0;
  bool completed_ = false;
  bool discarded_ = false;
};

// Process 0, step 3, replacing: removes the old manifest.
void retire_object_manifest(const storage::Location& folder);

// Process 0, step 3: writes the manifest (removing it again if that failed,
// in case the store wrote it anyway), then removes the data files that
// `files` does not list (best effort: the checkpoint is saved once its
// manifest is; a stale file left is never read, and the next save removes it).
void write_object_manifest(const storage::Location& folder, std::string_view manifest_bytes,
                           std::span<const checkpoint::DataFile> files);

}  // namespace reshard::pipelines_detail
