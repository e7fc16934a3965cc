// A parallel upload into a local file: every process writes into one staging
// sibling at the bytes' final offsets; the starter fsyncs and renames it into
// place. A writer going front to back has the kernel start writing each
// kWritebackBytes behind it, so that the disk works while the rest is
// produced and the fsync at commit has only the tail left to wait for.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "reshard/storage/parallel_upload.h"
#include "reshard/storage/store.h"
#include "storage/local/posix_io.h"

namespace reshard::storage_detail {

class LocalUpload final : public storage::ParallelUpload {
 public:
  // Creates the staging file, sized to the object (space reserved where the
  // file system can, so that a full disk fails here rather than halfway).
  static std::unique_ptr<LocalUpload> start(const storage::Location& destination, const storage::PartLayout& layout,
                                            storage::IfExists if_exists);
  // Opens the staging file `handle` names, beside `destination`.
  static std::unique_ptr<LocalUpload> join(const storage::Location& destination, const storage::PartLayout& layout,
                                           std::string_view handle);
  ~LocalUpload() override;

  const storage::Location& destination() const override { return destination_; }
  const storage::PartLayout& parts() const override { return layout_; }
  std::string handle() const override { return staging_.filename().string(); }
  storage::PartReceipt write_part(uint32_t index, std::span<const std::byte> bytes) override;
  bool writes_at_any_offset() const override { return true; }
  void write_at(uint64_t offset, std::span<const std::byte> bytes) override;
  void finish_writes() override;
  void complete(std::vector<storage::PartReceipt> receipts) override;
  void abort() noexcept override;

  static constexpr uint64_t kWritebackBytes = uint64_t{16} << 20;

 private:
  LocalUpload(storage::Location destination, storage::PartLayout layout, std::filesystem::path staging, UniqueFd fd,
              bool starter, storage::IfExists if_exists);
  // Follows the bytes written front to back from offset 0 and starts the
  // writeback of each kWritebackBytes of them (writes elsewhere: no hint).
  void note_written(uint64_t offset, uint64_t length);

  storage::Location destination_;
  storage::PartLayout layout_;
  std::filesystem::path staging_;
  UniqueFd fd_;
  bool starter_ = false;
  bool done_ = false;  // completed or aborted
  storage::IfExists if_exists_;
  std::mutex writeback_mutex_;
  uint64_t sequential_end_ = 0;  // bytes [0, this) were written in order
  uint64_t writeback_from_ = 0;  // where the bytes not yet sent to storage start
};

}  // namespace reshard::storage_detail
